package origin

import (
	"fmt"
	"net/http"
)

// LieHeader marks an answer the origin made against HTTP (Profile.Lie):
// no client may ever receive one, from the upstream or from a store.
const LieHeader = "X-Origin-Lie"

// conditional reports whether r can be answered 304 (RFC 9110 §13.2.2).
func conditional(r *http.Request) bool {
	return r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != ""
}

// lie answers a request that carried no condition either with a 304 Not
// Modified (RFC 9110 §15.4.5: an answer to a conditional request only;
// the lie-304 draw) or with body framed by both Content-Length and
// Transfer-Encoding: chunked (RFC 9112 §6.3: to be handled as an error;
// the lie-framing draw), its connection closed after. Both are marked
// LieHeader: the sidecar must answer 502, never relay or store them.
func (o *Origin) lie(w http.ResponseWriter, notModified bool, body []byte) {
	h := w.Header()
	h.Set(LieHeader, "1")
	if notModified {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	c, bw, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer c.Close()
	fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\n%s: 1\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n",
		h.Get("Content-Type"), LieHeader, len(body), len(body), body)
	_ = bw.Flush()
}
