package entrywrite

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cachestatus"
)

var t0 = time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)

func entry() *cache.Entry {
	return &cache.Entry{Status: http.StatusOK, Body: []byte("hello"), StoredAt: t0, TTL: time.Minute,
		Header: http.Header{"Content-Type": {"text/plain"}, "Etag": {`"v1"`}, "Via": {"1.1 origin"}, "Set-Extra": {"x"}}}
}

func opts() *Options {
	return &Options{Via: []string{"1.1 sc"}, Now: func() time.Time { return t0.Add(30 * time.Second) }}
}

// A hit: the stored header, the sidecar's Via after the stored one (not
// into it), Age, the member, Content-Length and the body.
func TestWriteHit(t *testing.T) {
	e := entry()
	w := httptest.NewRecorder()
	Write(w, httptest.NewRequest(http.MethodGet, "/a", nil), e, cachestatus.Member{Hit: true, Detail: "l1"}, true, opts())
	h := w.Result().Header
	for k, want := range map[string][]string{
		"Via":            {"1.1 origin", "1.1 sc"},
		"Age":            {"30"},
		"Cache-Status":   {"sidecache; hit; detail=l1"},
		"Content-Length": {"5"},
		"Content-Type":   {"text/plain"},
	} {
		if !slices.Equal(h[k], want) {
			t.Errorf("%s: %q, want %q", k, h[k], want)
		}
	}
	if w.Code != http.StatusOK || w.Body.String() != "hello" {
		t.Errorf("%d %q, want 200 hello", w.Code, w.Body)
	}
	if got := e.Header["Via"]; !slices.Equal(got, []string{"1.1 origin"}) {
		t.Errorf("the stored Via became %q", got)
	}
}

// A conditional that matches a stored 200 gets a 304 with the fields RFC
// 9110 §15.4.5 names, no body; a HEAD gets the header alone; a fetched
// answer under a second old gets no Age.
func TestWriteConditionalAndHead(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/a", nil)
	r.Header.Set("If-None-Match", `"v1"`)
	w := httptest.NewRecorder()
	Write(w, r, entry(), cachestatus.Member{Hit: true}, true, opts())
	if w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Fatalf("%d with %d body bytes, want 304 and none", w.Code, w.Body.Len())
	}
	h := w.Result().Header
	if h.Get("Etag") != `"v1"` || h.Get("Set-Extra") != "" || h.Get("Content-Type") != "" || h.Get("Age") != "30" {
		t.Errorf("304 header %v: want Etag and Age, no other stored field", h)
	}
	w = httptest.NewRecorder()
	Write(w, httptest.NewRequest(http.MethodHead, "/a", nil), entry(), cachestatus.Member{Fwd: "miss", FwdStatus: 200}, false, opts())
	if w.Code != http.StatusOK || w.Body.Len() != 0 || w.Result().Header.Get("Content-Length") != "5" {
		t.Errorf("HEAD: %d, %d body bytes, Content-Length %q; want 200, none, 5", w.Code, w.Body.Len(), w.Result().Header.Get("Content-Length"))
	}
	if v, ok := w.Result().Header["Age"]; ok {
		t.Errorf("a fetched answer got Age %q", v)
	}
}

// headerWriter is a ResponseWriter that keeps its header map across
// answers, as a server's does not allocate one per Write.
type headerWriter struct{ h http.Header }

func (w *headerWriter) Header() http.Header         { return w.h }
func (w *headerWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *headerWriter) WriteHeader(int)             {}

// One allocation per answer: the three values' backing array (an answer
// that arrived with a Via of its own costs one more, for the copy).
func TestWriteAllocatesOnce(t *testing.T) {
	e, o := entry(), opts()
	delete(e.Header, "Via")
	r := httptest.NewRequest(http.MethodGet, "/a", nil)
	st := cachestatus.Member{Fwd: "miss", FwdStatus: 200, Stored: true}
	w := &headerWriter{h: make(http.Header, 16)}
	if n := testing.AllocsPerRun(100, func() { delete(w.h, "Via"); Write(w, r, e, st, false, o) }); n != 1 {
		t.Errorf("%v allocations per answer, want 1", n)
	}
}
