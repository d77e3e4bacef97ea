package invariant

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// The client-body row (random stream 33): writes whose body the origin
// never reads, and writes whose chunked body the client gets wrong.
//
//   - deaf: a 64 MiB body to an origin that takes none of it (an app whose
//     workers are all busy, origin.DeafHeader): the sidecar must cut the
//     upstream connection once it took nothing for upstream.timeout and
//     answer 504, never hold the client until it gives up (probe D2: no
//     answer at 240 s).
//   - bad chunk: a chunk size past 2^63 (probe D6): the failure is the
//     client's, answered 400 and the connection closed, never 502 as an
//     upstream failure.
//
// The origin applies neither (the deaf one never reads, the bad chunk's
// answers nothing); each costs at most one upstream call, the write's.

// deafBody is a deaf write's Content-Length: far past the socket buffers
// of both hops, of which only the first megabytes are ever sent.
const deafBody = 64 << 20

// drawClientBody makes some plain writes deaf or bad-chunked.
func (r *run) drawClientBody(q *traffic.Request) {
	if !r.cfg.Mix.Has("client-body") || q.Method != http.MethodPatch || q.Trickle ||
		q.Hangup || q.Chunked || q.Absolute || q.Asterisk || q.HalfClose || origin.Resource(q.Path) == "" {
		return
	}
	switch n := r.bodies.IntN(100); {
	case n < 4:
		q.Deaf, q.Body = true, ""
	case n < 8:
		q.BadChunk, q.Body = true, ""
	}
}

// doClientBody sends q (Deaf or BadChunk) on a connection of its own and
// checks the answer (see above).
func (r *run) doClientBody(ctx context.Context, q *traffic.Request, req *http.Request) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(q.Who.Addr)}, Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", req.URL.Host)
	if err != nil {
		r.violate("transport", "%s: client-body: %v", q, err)
		return
	}
	defer conn.Close()
	// Far past upstream.timeout (3 s): no answer by then is a held one.
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	kind, want := "deaf", http.StatusGatewayTimeout
	if q.BadChunk {
		kind, want = "bad-chunk", http.StatusBadRequest
	}
	req.Header.Set(origin.DeafHeader, kind)
	req.Header.Del("Expect")
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", req.Method, req.URL.RequestURI(), req.Host)
	if q.Deaf {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", deafBody)
	} else {
		b.WriteString("Transfer-Encoding: chunked\r\n")
	}
	req.Header.Write(&b)
	b.WriteString("\r\n")
	if q.BadChunk {
		b.WriteString("10000000000000001\r\n{}\r\n0\r\n\r\n")
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		r.violate("transport", "%s: client-body: %v", q, err)
		return
	}
	if q.Deaf {
		go func() {
			chunk := bytes.Repeat([]byte(" "), 64<<10)
			for n := 0; n < deafBody; n += len(chunk) {
				if _, err := conn.Write(chunk); err != nil {
					return // answered and closed, as it must be
				}
			}
		}()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		r.violate("client-body", "%s: %s body: no answer: %v", q, kind, err)
		return
	}
	resp.Body.Close()
	r.chk.Count("client-body-"+kind+"-"+resp.Status[:3], 1)
	if resp.StatusCode != want || !resp.Close {
		r.violate("client-body", "%s: %s body: answered %s (Connection: close %v), want %d and the connection closed", q, kind, resp.Status, resp.Close, want)
	}
}
