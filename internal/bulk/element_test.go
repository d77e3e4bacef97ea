package bulk

import (
	"net/http"
	"slices"
	"testing"
)

// TestElementHeader: an element keeps what the app said of the whole
// answer, loses what described the array's bytes, and gets its own strong
// ETag; a 404 element gets no validator.
func TestElementHeader(t *testing.T) {
	bulkHeader := func() http.Header {
		return http.Header{
			"Cache-Control": {"public, max-age=60"}, "Date": {"Wed, 25 Nov 2026 14:00:00 GMT"},
			"Content-Type": {"application/json; charset=utf-8"}, "Etag": {`W/"list"`}, "Content-Encoding": {"gzip"},
			"Vary": {"Accept-Encoding"}, "Set-Cookie": {"sid=opener"}, "X-App": {"v2"}, "Last-Modified": {"Wed, 25 Nov 2026 13:00:00 GMT"},
		}
	}
	h := ElementHeader(bulkHeader(), http.StatusOK, []byte(`{"id":1}`), []string{"Accept-Language"})
	for _, k := range []string{"Cache-Control", "Date", "Content-Type", "X-App", "Last-Modified"} {
		if !slices.Equal(h[k], bulkHeader()[k]) {
			t.Errorf("%s = %q, want the bulk answer's", k, h[k])
		}
	}
	for _, k := range []string{"Content-Encoding", "Set-Cookie"} {
		if _, ok := h[k]; ok {
			t.Errorf("element keeps %s", k)
		}
	}
	if h.Get("Vary") != "Accept-Language" {
		t.Errorf("Vary %q", h.Get("Vary"))
	}
	if tag := h.Get("Etag"); tag != ETag([]byte(`{"id":1}`)) || tag == ETag([]byte(`{"id":2}`)) || tag[0] != '"' {
		t.Errorf("ETag %q", tag)
	}
	nf := ElementHeader(bulkHeader(), http.StatusNotFound, []byte(`{"error":"not found"}`), nil)
	if nf.Get("Etag") != "" || nf.Get("Last-Modified") != "" || nf.Get("Content-Type") != "application/json" || nf.Get("Vary") != "" {
		t.Errorf("404 element header %v", nf)
	}
}

// BenchmarkElementHeader is the per-element cost a bulk answer's split
// adds: the element's header and its ETag.
func BenchmarkElementHeader(b *testing.B) {
	bulk := http.Header{"Cache-Control": {"public, max-age=60"}, "Content-Type": {"application/json"}, "Date": {"Wed, 25 Nov 2026 14:00:00 GMT"}, "Vary": {"Accept-Encoding"}}
	elem := []byte(`{"id":12345,"name":"user 12345","email":"user12345@example.com","version":1}`)
	b.ReportAllocs()
	for b.Loop() {
		ElementHeader(bulk.Clone(), http.StatusOK, elem, nil)
	}
}
