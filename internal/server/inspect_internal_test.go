package server

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
)

// TestInspectETagBesideHeader: the inspect view shows an entry's ETag
// whether its header holds it or the entry keeps it beside a header the
// elements of a bulk answer share (cache.Entry.SetETag).
func TestInspectETagBesideHeader(t *testing.T) {
	now := time.Now()
	shared := http.Header{"Last-Modified": {"Mon, 02 Jan 2006 15:04:05 GMT"}}
	field := &cache.Entry{Status: 200, Header: shared, StoredAt: now, TTL: time.Minute}
	field.SetETag([]string{`"t"`})
	inHeader := &cache.Entry{Status: 200, Header: field.FullHeader(), StoredAt: now, TTL: time.Minute}
	a, b := viewEntry("l1", "k", field, now), viewEntry("l1", "k", inHeader, now)
	if a.ETag != `"t"` || !reflect.DeepEqual(a, b) {
		t.Errorf("beside the header: %+v\nin it: %+v", a, b)
	}
	if v := viewEntry("l1", "k", &cache.Entry{Status: 200}, now); v.ETag != "" {
		t.Errorf("no header: ETag %q", v.ETag)
	}
}
