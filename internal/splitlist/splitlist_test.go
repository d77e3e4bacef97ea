package splitlist_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/sidecache/sidecache/internal/splitlist"
)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// TestAnswer: the elements in order, other statuses left out, one
// Content-Type and the Cache-Control they share.
func TestAnswer(t *testing.T) {
	type el struct {
		status int
		h      http.Header
		body   string
	}
	cases := []struct {
		name         string
		els          []el
		body, ct, cc string
		private      bool
	}{
		{"none", nil, "[]", "application/json", "", false},
		{"in order, a 404 left out", []el{
			{200, hdr("Content-Type", "application/vnd.x+json", "Cache-Control", "max-age=60"), `{"id":3}`},
			{404, hdr("Cache-Control", "no-store"), `nope`},
			{200, hdr("Cache-Control", "max-age=60"), `{"id":1}`},
		}, `[{"id":3},{"id":1}]`, "application/vnd.x+json", "max-age=60", false},
		{"Cache-Control differs", []el{
			{200, hdr("Cache-Control", "max-age=60"), `1`}, {200, hdr("Cache-Control", "max-age=30"), `2`},
		}, `[1,2]`, "application/json", "", false},
		{"one private", []el{
			{200, hdr(), `1`}, {200, hdr("Cache-Control", "private"), `2`},
		}, `[1,2]`, "application/json", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := splitlist.Make(len(tc.els))
			for _, e := range tc.els {
				l.Add(e.status, e.h, []byte(e.body))
			}
			a := l.Answer()
			if string(a.Body) != tc.body || a.ContentType != tc.ct || a.CacheControl != tc.cc || a.Private != tc.private {
				t.Errorf("got %q %q %q private=%v, want %q %q %q private=%v",
					a.Body, a.ContentType, a.CacheControl, a.Private, tc.body, tc.ct, tc.cc, tc.private)
			}
		})
	}
}

// TestSetHeader: gzip only for a client that accepts it and a list of
// GzipMin bytes or more; a strong ETag per coding; private wins.
func TestSetHeader(t *testing.T) {
	big := []byte("[" + strings.Repeat(`"x",`, splitlist.GzipMin/4) + `"x"]`)
	small := []byte(`[1,2]`)
	cases := []struct {
		name   string
		a      splitlist.Answer
		accept []string
		gz     bool
		cc     string
	}{
		{"small, gzip accepted", splitlist.Answer{Body: small, ContentType: "application/json", CacheControl: "max-age=5"}, []string{"gzip"}, false, "max-age=5"},
		{"big, gzip accepted", splitlist.Answer{Body: big, ContentType: "application/json"}, []string{"gzip, br"}, true, ""},
		{"big, identity only", splitlist.Answer{Body: big, ContentType: "application/json", Private: true, CacheControl: "max-age=5"}, nil, false, "private"},
	}
	tags := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hd := http.Header{}
			if gz := tc.a.SetHeader(hd, tc.accept); gz != tc.gz {
				t.Errorf("gzip %v, want %v", gz, tc.gz)
			}
			tag := hd.Get("Etag")
			if !strings.HasPrefix(tag, `"`) || strings.HasSuffix(tag, `-gzip"`) != tc.gz || tags[tag] {
				t.Errorf("ETag %s (gzip %v; seen before %v)", tag, tc.gz, tags[tag])
			}
			tags[tag] = true
			if hd.Get("Vary") != "Accept-Encoding" || hd.Get("Cache-Control") != tc.cc || hd.Get("Content-Type") != tc.a.ContentType {
				t.Errorf("header %v", hd)
			}
		})
	}
}

// TestCompress: a pooled writer, reused, gives each body back whole.
func TestCompress(t *testing.T) {
	var g splitlist.Gzip
	for _, s := range []string{"first list", strings.Repeat("second ", 1000), ""} {
		zr, err := gzip.NewReader(bytes.NewReader(g.Compress([]byte(s))))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(zr)
		if err != nil || string(b) != s {
			t.Errorf("round trip: %q %v, want %q", b, err, s)
		}
	}
}

// TestWrite: the answer with its Cache-Status; a 304 for an If-None-Match
// holding its ETag; no body to a HEAD; gzip to a client that takes it.
func TestWrite(t *testing.T) {
	var l splitlist.List
	l.Add(http.StatusOK, hdr("Content-Type", "application/json"), []byte(`{"id":1,"pad":"`+strings.Repeat("x", splitlist.GzipMin)+`"}`))
	a := l.Answer()
	var gz splitlist.Gzip
	w := httptest.NewRecorder()
	a.Write(w, httptest.NewRequest(http.MethodGet, "/users?ids=1", nil), "sidecache; hit", &gz)
	if w.Code != http.StatusOK || w.Body.Len() != len(a.Body) || w.Header().Get("Cache-Status") != "sidecache; hit" || w.Header().Get("Content-Length") != strconv.Itoa(len(a.Body)) {
		t.Fatalf("GET: %d, %d bytes, %v", w.Code, w.Body.Len(), w.Header())
	}
	r := httptest.NewRequest(http.MethodGet, "/users?ids=1", nil)
	r.Header.Set("If-None-Match", w.Header().Get("Etag"))
	w = httptest.NewRecorder()
	a.Write(w, r, "sidecache; hit", &gz)
	if w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Errorf("If-None-Match: %d, %d bytes", w.Code, w.Body.Len())
	}
	w = httptest.NewRecorder()
	a.Write(w, httptest.NewRequest(http.MethodHead, "/users?ids=1", nil), "sidecache; hit", &gz)
	if w.Code != http.StatusOK || w.Body.Len() != 0 {
		t.Errorf("HEAD: %d, %d bytes", w.Code, w.Body.Len())
	}
	r = httptest.NewRequest(http.MethodGet, "/users?ids=1", nil)
	r.Header.Set("Accept-Encoding", "gzip")
	w = httptest.NewRecorder()
	a.Write(w, r, "sidecache; hit", &gz)
	if w.Header().Get("Content-Encoding") != "gzip" || w.Body.Len() >= len(a.Body) || w.Header().Get("Content-Length") != strconv.Itoa(w.Body.Len()) {
		t.Errorf("gzip: %v, %d bytes", w.Header(), w.Body.Len())
	}
}

// TestVary: the list varies on every header an answer added to it varies
// on (a 404 left out included) and on the keyed headers, with
// Accept-Encoding; Vary: * anywhere is the list's. Cache-Control is read
// from every line.
func TestVary(t *testing.T) {
	l := splitlist.Make(2, "x-tenant")
	l.Add(200, http.Header{"Vary": {"accept-language", "Cookie"}, "Cache-Control": {"max-age=60", "no-cache"}}, []byte(`{"id":1}`))
	l.Add(404, http.Header{"Vary": {"X-Region"}}, nil)
	l.Add(200, http.Header{"Vary": {"Accept-Language"}, "Cache-Control": {"max-age=60"}}, []byte(`{"id":2}`))
	hd := http.Header{}
	l.Answer().SetHeader(hd, nil)
	if v := hd.Values("Vary"); len(v) != 1 || v[0] != "Accept-Encoding, Accept-Language, Cookie, X-Region, X-Tenant" {
		t.Errorf("Vary %q", v)
	}
	if cc := hd.Get("Cache-Control"); cc != "" {
		t.Errorf("Cache-Control %q: the elements' differ in their second line", cc)
	}
	star := splitlist.Make(1)
	star.Add(200, http.Header{"Vary": {"*"}}, []byte(`1`))
	hd = http.Header{}
	star.Answer().SetHeader(hd, nil)
	if v := hd.Get("Vary"); v != "*" {
		t.Errorf("Vary %q, want *", v)
	}
}
