package invariant

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/origin"
)

// The stalled-length row. After about one round in four (stream 61), at
// most stalledStages times a run, one identity sends through one replica
// a request for a resource of the row's own (origin.StalledPath, on no
// route: pass-through), on a connection of its own: the first stage a GET
// (the lean loop), the second a PATCH (ReverseProxy), later ones either.
// The origin answers 200 with a Content-Length, sends the header and 0, 8
// or 1000 bytes of the body, then nothing more until the runner releases
// it.
//
// While the origin holds the rest, the client must read the status line
// and every byte the origin sent (stalled-length): an answer of known
// length is flushed before a read that waits on the upstream, as NGINX
// with proxy_buffering off and Varnish's streaming do. Held in the
// sidecar's write buffer, the client got nothing until upstream.timeout
// cut the call, and then a closed connection without a status. The
// runner then releases the origin, which closes short of its
// Content-Length: the client must see the body broken, never whole.
//
// Counts stalled-length-<method>-<sent> (each stage), and
// stalled-length-late when the client read what came only after the
// sidecar had cut the call (a loaded machine: the bytes reached it, so
// they were flushed, but not within upstream.timeout).

// stalledStages bounds the row's stages a run.
const stalledStages = 3

func (r *run) stalledLength(ctx context.Context, round int) {
	if !r.cfg.Mix.Has("stalled-length") || r.stalledRng.IntN(100) >= 25 || r.stalledDone >= stalledStages {
		return
	}
	rng := r.stalledRng
	method := [...]string{http.MethodGet, http.MethodPatch}[r.stalledDone%2]
	if r.stalledDone >= 2 && rng.IntN(2) == 0 {
		method = http.MethodGet
	}
	r.stalledDone++
	k := rng.IntN(len(r.cfg.Replicas))
	who := r.gen.Who(rng.IntN(4))
	sent := [...]int{0, 8, 1000}[rng.IntN(3)]
	path := origin.StalledPath(int(r.cfg.Seed%100_000)*1000+round%1000, sent)
	r.chk.Count(fmt.Sprintf("stalled-length-%s-%d", method, sent), 1)
	released := false
	defer func() {
		if !released {
			r.cfg.Origin.ReleaseStalled(path) // whatever happened, the origin lets go
		}
	}()
	what := fmt.Sprintf("%s %s through replica %d (Content-Length %d, %d bytes sent)", method, path, k, origin.StalledLength, sent)
	bu, err := url.Parse(r.cfg.Replicas[k])
	if err != nil {
		r.violate("harness", "%s: %v", what, err)
		return
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(who.Addr)}, Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", bu.Host)
	if err != nil {
		r.violate("transport", "%s: %v", what, err)
		return
	}
	defer conn.Close()
	// A hang guard, far past upstream.timeout: the sidecar cuts the
	// stalled call long before it.
	conn.SetDeadline(time.Now().Add(time.Minute))
	framing := "" // a bodiless GET: the lean loop's
	if method != http.MethodGet {
		framing = "Content-Length: 0\r\n"
		r.patches++ // the row's write reaches the origin (the runner's count of PATCHes)
	}
	if _, err := fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", method, path, r.cfg.Host, framing); err != nil {
		r.violate("transport", "%s: %v", what, err)
		return
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		r.violate("stalled-length", "%s: no status line while the origin held the rest of its answer: %v", what, err)
		return
	}
	defer resp.Body.Close()
	first := make([]byte, sent)
	n, err := io.ReadFull(resp.Body, first)
	if err != nil {
		r.violate("stalled-length", "%s: answered %s, then %d of the %d bytes the origin sent while it held the rest: %v", what, resp.Status, n, sent, err)
		return
	}
	released = true
	if !r.cfg.Origin.ReleaseStalled(path) {
		r.chk.Count("stalled-length-late", 1)
	}
	rest, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || err == nil || n+len(rest) >= origin.StalledLength {
		r.violate("stalled-length", "%s: answered %s, %d bytes, then %v: want the origin's 200 broken off short of its Content-Length", what, resp.Status, n+len(rest), err)
	}
}
