package invariant

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// The conn-cap row. The capped replica (Config.Capped) is a peer of the
// others (one Redis, one origin) whose proxy listener holds
// server.max_connections (Config.MaxConns) connections at most. In about
// one round in five (stream 52), once the round is over, a stage:
//
//  1. fills the cap with a crowd of idle keep-alive connections: each
//     answered one cached read of /r/<id> (checked), then left open;
//  2. sends, each on a connection of its own, a write of /r/<id> and
//     reads of it: each must be answered within capGuard, though every
//     slot is held by an idle connection (the oldest idle is closed for
//     it, counted in sidecache_client_connections_reaped_total, at least
//     once per new connection); the write is acknowledged through the
//     capped replica, so the reads after it, there and through the other
//     replicas, are held to own-write and max-lag as any;
//  3. closes them all and holds the cap with connections in a request (a
//     header section cut before its end): the listener waits (counted in
//     sidecache_client_connection_waits_total), a new client's read is
//     answered once one held request is completed, and so are they.
//
// A hang is a violation (conn-cap), never a hung run: every wait is
// bounded by capGuard, far under the replica's idle_timeout (120 s),
// which is what would free a slot held by an idle connection that is
// never closed for a new one.
//
// Checked counts conn-cap-stages, conn-cap-read-<status> and
// conn-cap-held-cut (a held request the machine's load let
// read_header_timeout cut).

// capGuard bounds each wait of the stage.
const capGuard = 10 * time.Second

// cappedIndex is the capped replica's index as the checks name it (the
// trickle replica's is len(Replicas)).
func (r *run) cappedIndex() int { return len(r.cfg.Replicas) + 1 }

func (r *run) connCap(ctx context.Context) {
	if !r.cfg.Mix.Has("conn-cap") || r.cfg.Capped == "" || r.cfg.MaxConns <= 0 || r.caps.IntN(100) >= 20 {
		return
	}
	rng := r.caps
	r.chk.Count("conn-cap-stages", 1)
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	reaped, ok := r.capCounter(ctx, "sidecache_client_connections_reaped_total")
	if !ok {
		return
	}
	// 1. The crowd: the cap full of idle connections.
	for j := 0; j < r.cfg.MaxConns; j++ {
		who := r.gen.Who(rng.IntN(4))
		c, br, ok := r.capDial(ctx, who)
		if !ok {
			return
		}
		open = append(open, c)
		if !r.capExchange(c, br, r.capRead(who, fmt.Sprintf("/r/%d", 1+rng.IntN(4))), "crowd") {
			return
		}
	}
	// 2. New clients at the cap: a write and reads.
	id := fmt.Sprint(1 + rng.IntN(4))
	who := r.gen.Who(rng.IntN(4))
	w := &traffic.Request{
		Kind: "write", Route: "r", Replica: r.cappedIndex(), Who: who, Method: http.MethodPatch, Path: "/r/" + id,
		Hdr: http.Header{}, Res: origin.Resource("/r/" + id), Budget: traffic.BudgetWrite,
		Sent: map[string]string{"addr": who.Addr, "cookie": "", "auth": "", "tenant": "", "lang": ""},
	}
	news := []*traffic.Request{r.capRead(r.gen.Who(rng.IntN(4)), "/r/"+id), w, r.capRead(who, "/r/"+id), r.capRead(r.gen.Who(rng.IntN(4)), "/r/"+id)}
	for _, q := range news {
		c, br, ok := r.capDial(ctx, q.Who)
		if !ok {
			return
		}
		open = append(open, c)
		if !r.capExchange(c, br, q, "new client at the cap of idle connections") {
			return
		}
	}
	if after, ok := r.capCounter(ctx, "sidecache_client_connections_reaped_total"); ok && after-reaped < float64(len(news)) {
		r.violate("conn-cap", "capped replica: %d new connections let in with max_connections %d idle ones open, but sidecache_client_connections_reaped_total grew by %v", len(news), r.cfg.MaxConns, after-reaped)
	}
	for k := range r.cfg.Replicas {
		r.readBack(ctx, tunnelRead(who, k, "/r/"+id), r.cfg.Replicas[k], "read after a write at the cap", "conn-cap-read-")
	}
	for _, c := range open {
		c.Close()
	}
	open = nil
	// 3. The cap held by connections in a request.
	waits, ok := r.capCounter(ctx, "sidecache_client_connection_waits_total")
	if !ok {
		return
	}
	type held struct {
		c    net.Conn
		br   *bufio.Reader
		q    *traffic.Request
		rest string
	}
	var hs []held
	for j := 0; j < r.cfg.MaxConns; j++ {
		who := r.gen.Who(rng.IntN(4))
		c, br, ok := r.capDial(ctx, who)
		if !ok {
			return
		}
		open = append(open, c)
		q := r.capRead(who, fmt.Sprintf("/r/%d", 1+rng.IntN(4)))
		// The header section cut before its empty line: a request begun.
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n", q.Path, r.cfg.Host); err != nil {
			r.violate("transport", "%s: held request: %v", q, err)
			return
		}
		hs = append(hs, held{c, br, q, "\r\n"})
	}
	for deadline := time.Now().Add(capGuard); ; time.Sleep(5 * time.Millisecond) {
		n, ok := r.capCounter(ctx, "sidecache_client_connection_waits_total")
		if !ok {
			return
		}
		if n > waits {
			break
		}
		if time.Now().After(deadline) {
			r.violate("conn-cap", "capped replica: %d connections in a request (max_connections %d), yet the listener never waited for one to end", len(hs), r.cfg.MaxConns)
			return
		}
	}
	late := make(chan bool, 1)
	lq := r.capRead(r.gen.Who(rng.IntN(4)), "/r/"+id)
	lc, lbr, ok := r.capDial(ctx, lq.Who)
	if !ok {
		return
	}
	open = append(open, lc)
	go func() { late <- r.capExchange(lc, lbr, lq, "new client while every slot was in a request") }()
	for _, h := range hs {
		start := check.Now()
		if _, err := fmt.Fprint(h.c, h.rest); err != nil {
			r.chk.Count("conn-cap-held-cut", 1)
			continue
		}
		r.capAnswer(h.c, h.br, h.q, start, "held request", true)
	}
	<-late
}

// capRead is a plain read of path (route r) by who through the capped
// replica, as the checks hold it.
func (r *run) capRead(who *traffic.Identity, path string) *traffic.Request {
	q := tunnelRead(who, 0, path)
	q.Replica = r.cappedIndex()
	return q
}

// capDial opens a connection from who's address to the capped replica;
// the kernel completes it even while the listener waits at its cap.
func (r *run) capDial(ctx context.Context, who *traffic.Identity) (net.Conn, *bufio.Reader, bool) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(who.Addr)}, Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", strings.TrimPrefix(r.cfg.Capped, "http://"))
	if err != nil {
		r.violate("transport", "capped replica: dial from %s: %v", who.Addr, err)
		return nil, nil, false
	}
	return c, bufio.NewReader(c), true
}

// capExchange sends q on c and checks its answer; it reports whether the
// stage may go on.
func (r *run) capExchange(c net.Conn, br *bufio.Reader, q *traffic.Request, what string) bool {
	req, err := r.gen.HTTPRequest(context.Background(), q, r.cfg.Capped)
	if err != nil {
		r.violate("harness", "%s: %v", q, err)
		return false
	}
	for k, vs := range q.Hdr {
		req.Header[k] = vs
	}
	start := check.Now()
	_ = c.SetDeadline(time.Now().Add(capGuard))
	if err := req.Write(c); err != nil {
		r.violate("transport", "%s: %s: %v", q, what, err)
		return false
	}
	return r.capAnswer(c, br, q, start, what, false)
}

// capAnswer reads and checks the answer to q on c; a connection closed
// before it is tolerated only when mayCut (read_header_timeout, on a
// loaded machine, cut a held request).
func (r *run) capAnswer(c net.Conn, br *bufio.Reader, q *traffic.Request, start time.Time, what string, mayCut bool) bool {
	_ = c.SetDeadline(time.Now().Add(capGuard))
	req, _ := http.NewRequest(q.Method, r.cfg.Capped+q.Path, nil)
	resp, err := readFinal(br, req)
	if err != nil {
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			r.violate("conn-cap", "capped replica: %s: %s: not answered within %v (max_connections %d): a client kept out at the cap", q, what, capGuard, r.cfg.MaxConns)
		case mayCut:
			r.chk.Count("conn-cap-held-cut", 1)
		default:
			r.violate("transport", "capped replica: %s: %s: %v", q, what, err)
		}
		return false
	}
	body, err := check.ReadBody(resp)
	resp.Body.Close()
	end := check.Now()
	if err != nil {
		if !r.brokenOff(err) {
			r.violate("garbled", "%s: %s: %v", q, what, err)
		}
		return false
	}
	r.chk.Count("conn-cap-read-"+resp.Status[:3], 1)
	r.chk.Answer(q, resp, body, start, end)
	return true
}

// capCounter reads the capped replica's counter name.
func (r *run) capCounter(ctx context.Context, name string) (float64, bool) {
	n, err := readCounter(ctx, r.cfg.CappedAdmin, func(line string) bool {
		return strings.HasPrefix(line, name+" ")
	})
	if err != nil {
		r.violate("harness", "capped replica: /metrics: %v", err)
		return 0, false
	}
	return n, true
}
