package demo

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestFramework: with Options.Framework the demo answers as Express 5 with
// compression() in front of PostgreSQL does by default.
func TestFramework(t *testing.T) {
	fast := Options{Framework: true, QueryTime: -1, PerRowTime: -1}
	_, ts := start(t, fast)
	plain := do(t, ts, "GET", "/clients/5", "")
	if plain.status != 200 || plain.header.Get("Vary") != "Accept-Encoding" || plain.header.Get("Content-Encoding") != "" {
		t.Fatalf("small answer: %d Vary %q Content-Encoding %q", plain.status, plain.header.Get("Vary"), plain.header.Get("Content-Encoding"))
	}
	tag := plain.header.Get("Etag")
	if !strings.HasPrefix(tag, `W/"`) || plain.header.Get("Last-Modified") != "" {
		t.Errorf("ETag %q Last-Modified %q, want a weak ETag only", tag, plain.header.Get("Last-Modified"))
	}
	for _, p := range []string{"/Clients/5", "/CLIENTS/5/", "/clients/05", "/clients/+5"} {
		if r := do(t, ts, "GET", p, ""); r.status != 200 || !bytes.Equal(r.body, plain.body) {
			t.Errorf("%s: %d %q, want /clients/5's answer", p, r.status, r.body)
		}
	}
	if r := do(t, ts, "GET", "/clients/5", "", "If-None-Match", strings.TrimPrefix(tag, "W/")); r.status != 304 {
		t.Errorf("If-None-Match (weak comparison): %d, want 304", r.status)
	}
	for _, p := range []string{"/clients/99999999999", "/users?ids=1,2,3000000000", "/users/x"} {
		if r := do(t, ts, "GET", p, ""); r.status != 500 {
			t.Errorf("%s: %d, want 500 (the database refuses a non-int4 id)", p, r.status)
		}
	}
	ids := make([]string, 40)
	for i := range ids {
		ids[i] = itoa(i + 1)
	}
	bulk := do(t, ts, "GET", "/users?ids="+strings.Join(ids, ","), "", "Accept-Encoding", "gzip")
	if bulk.header.Get("Content-Encoding") != "gzip" || bulk.header.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("bulk over 1 KiB: Content-Encoding %q Vary %q", bulk.header.Get("Content-Encoding"), bulk.header.Get("Vary"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(bulk.body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(zr)
	_, ref := start(t, Options{QueryTime: -1, PerRowTime: -1})
	if want := do(t, ref, "GET", "/users?ids="+strings.Join(ids, ","), ""); !bytes.Equal(raw, want.body) {
		t.Errorf("bulk body differs from the plain demo's:\n%s\n%s", raw, want.body)
	}
	if r := do(t, ts, "GET", "/users/40", "", "Accept-Encoding", http.CanonicalHeaderKey("identity")); r.header.Get("Content-Encoding") != "" {
		t.Errorf("identity client got %q", r.header.Get("Content-Encoding"))
	}
}
