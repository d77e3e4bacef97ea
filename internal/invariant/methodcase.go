package invariant

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// doMethodCase sends q's request, its method a case variant of a known one
// (read-method-case: get, Head; write-method-override's lower-case patch),
// without a body, on a connection of its own from q's identity's address
// to base (in absolute-form when q says so).
// Method names are case-sensitive (RFC 9110 §9.1): "get" is no GET to the
// sidecar, which took it for a write and forwarded it, and the origin,
// which folds case as Werkzeug does, answered it 200 as the read, so the
// sidecar dropped the URI on every replica; a "patch" reached the origin
// as PATCH while no write route of the sidecar's took it. The answer must
// be the sidecar's own 400 (detail=method-case, no Via, which every answer
// relayed from the origin carries), and no call may reach the origin with
// the method (the runner's TakeMethodCases check, play.go): unsent, it
// drops nothing.
func (r *run) doMethodCase(ctx context.Context, q *traffic.Request, req *http.Request, base string) {
	row := "read-method-case"
	if q.Kind == "write" {
		row = "write-method-override"
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(q.Who.Addr)}, Timeout: 5 * time.Second}
	bu, err := url.Parse(base)
	if err != nil {
		r.violate("harness", "%s: %s: %v", q, row, err)
		return
	}
	conn, err := d.DialContext(ctx, "tcp", bu.Host)
	if err != nil {
		r.violate("transport", "%s: %s: %v", q, row, err)
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	req.Body, req.ContentLength, req.TransferEncoding, req.Trailer = nil, 0, nil, nil
	req.Header.Del("Expect")
	write := req.Write // the method as spelled: Write sends it as it is
	if q.Absolute {
		write = req.WriteProxy
	}
	if err := write(conn); err != nil {
		r.violate("transport", "%s: %s: %v", q, row, err)
		return
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		r.violate(row, "%s: no answer: %v", q, err)
		return
	}
	text, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	resp.Body.Close()
	q.Got = resp.StatusCode
	r.chk.Count(row+"-"+resp.Status[:3], 1)
	cs := resp.Header.Get("Cache-Status")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(cs, "detail=method-case") || resp.Header.Get("Via") != "" {
		r.violate(row, "%s: answered %s %.80q (Cache-Status %q, Via %q), want the sidecar's 400 for the method's case, unsent", q, resp.Status, text, cs, resp.Header.Get("Via"))
	}
}
