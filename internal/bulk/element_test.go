package bulk

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
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
			"Vary": {"Accept-Encoding"}, "Set-Cookie": {"sid=opener"}, "Set-Cookie2": {`sid="opener"`}, "X-App": {"v2"}, "Last-Modified": {"Wed, 25 Nov 2026 13:00:00 GMT"},
		}
	}
	h := ElementHeader(bulkHeader(), http.StatusOK, []byte(`{"id":1}`), []string{"Accept-Language"}, "")
	for _, k := range []string{"Cache-Control", "Date", "Content-Type", "X-App", "Last-Modified"} {
		if !slices.Equal(h[k], bulkHeader()[k]) {
			t.Errorf("%s = %q, want the bulk answer's", k, h[k])
		}
	}
	for _, k := range []string{"Content-Encoding", "Set-Cookie", "Set-Cookie2"} {
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
	nf := ElementHeader(bulkHeader(), http.StatusNotFound, []byte(`{"error":"not found"}`), nil, "")
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
		ElementHeader(bulk.Clone(), http.StatusOK, elem, nil, "")
	}
}

// TestElementETag: the app's per-element validator becomes the ETag when
// it is entity-tag text; anything else is refused, so the caller makes one.
func TestElementETag(t *testing.T) {
	for _, tc := range []struct {
		elem, want string
		ok         bool
	}{
		{`{"id":1,"version":7}`, `"7"`, true},
		{`{"id":1,"version":"v7"}`, `"v7"`, true},
		{`{"id":1,"version":"W/\"v7\""}`, `W/"v7"`, true},
		{`{"id":1,"version":"\"abc\""}`, `"abc"`, true},
		{`{"id":1,"version":"a b"}`, "", false},
		{`{"id":1,"version":"caf\u00e9"}`, "", false},
		{`{"id":1,"version":"x\r\nSet-Cookie: a=b"}`, "", false},
		{`{"id":1,"version":""}`, "", false},
		{`{"id":1,"version":null}`, "", false},
		{`{"id":1,"version":{"n":1}}`, "", false},
		{`{"id":1}`, "", false},
	} {
		got, ok := ElementETag([]byte(tc.elem), "version")
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: (%q, %v), want (%q, %v)", tc.elem, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzElementETag: whatever an element holds, the tag is refused or is a
// valid entity-tag of bounded size (never a header injection).
func FuzzElementETag(f *testing.F) {
	f.Add([]byte(`{"id":1,"version":"W/\"v7\""}`), "version")
	f.Add([]byte(`{"version":12}`), "version")
	f.Fuzz(func(t *testing.T, body []byte, name string) {
		var buf bytes.Buffer
		if json.Compact(&buf, body) != nil || buf.Len() == 0 || buf.Bytes()[0] != '{' {
			return
		}
		tag, ok := ElementETag(buf.Bytes(), name)
		if !ok {
			if tag != "" {
				t.Fatalf("refused with tag %q", tag)
			}
			return
		}
		opaque := strings.TrimPrefix(tag, "W/")
		if len(tag) > maxETag+2 || !isOpaqueTag(opaque) {
			t.Fatalf("tag %q is not an entity-tag", tag)
		}
	})
}

// TestElements: the headers prepared once per answer are, element by
// element, those ElementHeader makes, each a map of its own whose shared
// values an append does not reach through.
func TestElements(t *testing.T) {
	for _, h := range []http.Header{
		{"Cache-Control": {"public, max-age=60"}, "Date": {"Wed, 25 Nov 2026 14:00:00 GMT"},
			"Content-Type": {"application/json; charset=utf-8"}, "Etag": {`W/"list"`}, "Content-Encoding": {"gzip"},
			"Vary": {"Accept-Encoding"}, "Set-Cookie": {"a=1", "b=2"}, "X-App": {"v2", "v3"}, "Last-Modified": {"Wed, 25 Nov 2026 13:00:00 GMT"}},
		{"Cache-Control": {"max-age=5"}, "X-Nil": nil, "X-Empty": {}, "X-Last": {"a", "b"}},
		{},
	} {
		for _, vary := range [][]string{nil, {"Accept-Language", "X-Tenant"}} {
			src := h.Clone()
			es := NewElements(src, vary)
			if !reflect.DeepEqual(src, h) {
				t.Fatalf("NewElements changed its header: %v", src)
			}
			for _, c := range []struct {
				status     int
				body, etag string
			}{{200, `{"id":1}`, ""}, {200, `{"id":2}`, `"v7"`}, {404, `{"error":"not found"}`, ""}, {500, `{}`, "ignored"}} {
				etag := c.etag
				if c.status != 200 {
					etag = ""
				}
				want := ElementHeader(h.Clone(), c.status, []byte(c.body), vary, etag)
				got := es.Header(c.status, []byte(c.body), etag)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%v vary %v status %d: got %v, want %v", h, vary, c.status, got, want)
				}
				slot := make([]string, 0, 1)
				in := es.HeaderIn(slot, c.status, []byte(c.body), etag)
				if !reflect.DeepEqual(in, want) {
					t.Errorf("%v vary %v status %d: HeaderIn got %v, want %v", h, vary, c.status, in, want)
				}
				if c.status == 200 && &in["Etag"][0] != &slot[:1][0] {
					t.Error("HeaderIn: the ETag's value is not held in slot")
				}
				for k := range got {
					if got[k] != nil {
						got[k] = append(got[k], "appended")
					}
					delete(got, k)
				}
				got["X-Added"] = []string{"x"}
				if again := es.Header(c.status, []byte(c.body), etag); !reflect.DeepEqual(again, want) {
					t.Errorf("a change to one element's header reached the next: %v", again)
				}
			}
		}
	}
}

func BenchmarkElements(b *testing.B) {
	bulk := http.Header{"Cache-Control": {"public, max-age=60"}, "Content-Type": {"application/json"}, "Date": {"Wed, 25 Nov 2026 14:00:00 GMT"}, "Vary": {"Accept-Encoding"}}
	elem := []byte(`{"id":12345,"name":"user 12345","email":"user12345@example.com","version":1}`)
	es := NewElements(bulk, nil)
	b.ReportAllocs()
	for b.Loop() {
		es.Header(http.StatusOK, elem, "")
	}
}
