package cache

import (
	"bytes"
	"maps"
	"net/http"
	"testing"
	"time"
)

// TestETagBesideHeader: an entry whose ETag SetETag keeps beside its
// header is stored in the layout of one with the ETag in it (replicas of
// either version read each other's entries), decodes to that form, and
// reads, costs and copies the same in both.
func TestETagBesideHeader(t *testing.T) {
	const tag = `"abc"`
	for _, h := range []http.Header{
		{},
		{"Content-Type": {"application/json"}, "Cache-Control": {"max-age=60"}, "Last-Modified": {"Mon, 02 Jan 2006 15:04:05 GMT"}},
	} {
		field := &Entry{Status: 200, Header: h, Body: []byte(`{"id":1}`), StoredAt: time.Unix(1e9, 0), TTL: time.Minute, Tags: []string{"_route:u"}}
		field.SetETag([]string{tag})
		inHeader := *field
		inHeader.etag = nil
		inHeader.Header = maps.Clone(h)
		inHeader.Header["Etag"] = []string{tag}

		if field.ETag() != tag || inHeader.ETag() != tag {
			t.Errorf("ETag: %q beside, %q in the header", field.ETag(), inHeader.ETag())
		}
		if field.Header.Get("Etag") != "" {
			t.Errorf("SetETag put the ETag into the (shared) header")
		}
		if !maps.EqualFunc(field.FullHeader(), inHeader.Header, func(a, b []string) bool { return len(a) == len(b) && a[0] == b[0] }) {
			t.Errorf("FullHeader %v, want %v", field.FullHeader(), inHeader.Header)
		}
		if field.Size() != inHeader.Size() || field.KeyedSize("k") != inHeader.KeyedSize("k") {
			t.Errorf("Size: %d beside, %d in the header", field.Size(), inHeader.Size())
		}
		b := Marshal(field)
		if len(h) == 0 && !bytes.Equal(b, Marshal(&inHeader)) {
			t.Errorf("stored layout differs:\n%x\n%x", b, Marshal(&inHeader))
		}
		if len(b) != len(Marshal(&inHeader)) {
			t.Errorf("stored length %d, want %d", len(b), len(Marshal(&inHeader)))
		}
		got, err := Unmarshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if !equalEntry(got, &inHeader) || got.ETagField() != nil || got.ETag() != tag {
			t.Errorf("decoded %+v, want %+v", got, &inHeader)
		}
		if len(h) > 0 {
			// Nothing SetETag left the header with may reach it.
			if _, ok := h["Etag"]; ok {
				t.Errorf("shared header changed")
			}
		}
	}
}
