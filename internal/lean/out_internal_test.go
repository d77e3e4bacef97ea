package lean

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// writeOut writes what http.Request.Write writes, plus the Transport's
// Accept-Encoding: gzip at the end of the header when asked, for random
// headers of valid fields: the order of the fields, repeated fields,
// empty values, padded values, an absent, empty or set User-Agent.
func TestWriteOutMatchesRequestWrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"Accept", "Accept-Encoding", "User-Agent", "X-Request-Id", "Via", "X-Forwarded-For",
		"Traceparent", "Cookie", "A", "Zz", "x-lower", "Range", "Content-Length", "Trailer", "Host", "If-None-Match"}
	values := []string{"", "v", " padded\t", "a, b", "\tx", "gzip", "bytes=0-1", "1"}
	for i := range 2000 {
		h := http.Header{}
		for range rng.IntN(8) {
			k := names[rng.IntN(len(names))]
			for range rng.IntN(3) {
				h[k] = append(h[k], values[rng.IntN(len(values))])
			}
			if _, ok := h[k]; !ok && rng.IntN(2) == 0 {
				h[k] = nil
			}
		}
		u := &url.URL{Scheme: "http", Host: "up:8080", Path: "/users", RawQuery: "ids=1,2"}
		out := &http.Request{Method: http.MethodGet, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h}
		gz := h.Get("Accept-Encoding") == "" && h.Get("Range") == ""
		var want bytes.Buffer
		if err := out.Write(&want); err != nil {
			t.Fatal(err)
		}
		w := want.String()
		if gz {
			w = strings.TrimSuffix(w, "\r\n") + "Accept-Encoding: gzip\r\n\r\n"
		}
		var got bytes.Buffer
		bw := bufio.NewWriter(&got)
		if err := writeOut(bw, out, "up:8080", gz); err != nil {
			t.Fatal(err)
		}
		if got.String() != w {
			t.Fatalf("case %d, header %q:\nwriteOut %q\nWrite    %q", i, h, got.String(), w)
		}
	}
}
