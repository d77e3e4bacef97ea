package edge

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nopWriter) WriteHeader(int)             {}

// BenchmarkGuard is what the request rules add to a plain pass-through
// GET: Run: go test -run - -bench . -benchmem ./internal/edge
func BenchmarkGuard(b *testing.B) {
	g := NewGuard(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), Options{Via: "sidecache"})
	r := httptest.NewRequest("GET", "/other", nil)
	r.Header.Set("Accept", "*/*")
	r.Header.Set("User-Agent", "bench")
	w := &nopWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		delete(r.Header, "Via")
		g.ServeHTTP(w, r)
	}
}

// BenchmarkScan is the framing scan of a typical request head.
func BenchmarkScan(b *testing.B) {
	head := []byte("GET /clients/42?fields=name HTTP/1.1\r\nHost: clients.svc\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\nAccept: application/json\r\nAccept-Encoding: gzip, br\r\nX-Request-Id: 0123456789abcdef\r\n\r\n")
	var s scanner
	b.SetBytes(int64(len(head)))
	for b.Loop() {
		s.feed(head)
	}
}

// BenchmarkFolds is the obs-fold scan of the same request head (fold.go),
// which every read feeds beside the framing scan.
func BenchmarkFolds(b *testing.B) {
	head := []byte("GET /clients/42?fields=name HTTP/1.1\r\nHost: clients.svc\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\nAccept: application/json\r\nAccept-Encoding: gzip, br\r\nX-Request-Id: 0123456789abcdef\r\n\r\n")
	var f folds
	b.SetBytes(int64(len(head)))
	for b.Loop() {
		f.feed(head)
	}
}
