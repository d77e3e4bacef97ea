package invariant

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
	"github.com/sidecache/sidecache/internal/relay"
)

// do sends q and checks its answer.
func (r *run) do(ctx context.Context, q *traffic.Request) {
	var hints, continues atomic.Int64
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
		if code != http.StatusContinue {
			hints.Add(1)
		} else {
			continues.Add(1) // every 100 read off the wire, the first one too
		}
		return nil
	}})
	base := r.cfg.Trickle // a trickled write's replica (doTrickled)
	if !q.Trickle {
		base = r.cfg.Replicas[q.Replica]
	}
	req, err := r.gen.HTTPRequest(ctx, q, base)
	if err != nil {
		r.violate("harness", "%s: %v", q, err)
		return
	}
	for k, vs := range q.Hdr {
		req.Header[k] = vs
	}
	if q.MethodCase != "" || q.Kind == "write" && q.Override == "lower" {
		r.doMethodCase(ctx, q, req, base) // methodcase.go
		return
	}
	if q.HalfClose {
		r.doHalfClosed(ctx, q, req)
		return
	}
	if q.Trickle {
		r.doTrickled(ctx, q, req)
		return
	}
	if q.Asterisk {
		r.doAsterisk(ctx, q, req)
		return
	}
	if q.Deaf || q.BadChunk {
		r.doClientBody(ctx, q, req)
		return
	}
	if q.Folded {
		r.doFolded(ctx, q, req)
		return
	}
	r.readTagged(ctx, q, base, "read before a write", "tagged-warm-") // respell.go
	if q.Hangup {
		hctx, cancel := context.WithCancel(req.Context()) // keeps proxyKey
		defer cancel()
		req = req.WithContext(httptrace.WithClientTrace(hctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { cancel() },
		}))
	}
	var before float64
	var copies map[string][]string
	held := r.heldChecked(q)
	if held {
		if before, held = r.unreadable(ctx, q.Replica); !held {
			return
		}
		if copies, held = r.heldCopies(ctx, q.Replica, heldIDs(q)); !held {
			return
		}
		q.HeldAtSend = heldAll(copies)
	}
	if q.Ghost {
		// Its key's lease was left by a crashed holder (ghost.go): past
		// the lease's ttl and the takeover's fetch, it waits for nothing.
		gctx, cancel := context.WithTimeout(req.Context(), r.ghostBound(q))
		defer cancel()
		req = req.WithContext(gctx)
	}
	start := check.Now()
	client := q.Who.Client
	if q.Absolute {
		client = q.Who.Proxied
	}
	resp, err := client.Do(req)
	if q.Hangup {
		if err == nil {
			resp.Body.Close() // answered before the hang-up: not acknowledged either
		}
		return
	}
	if err != nil && q.Ghost && timedOut(err) && ctx.Err() == nil {
		r.violate("held", "%s: no answer %v after it was sent: its key's lease, left by a crashed holder, held it past the lease's ttl and upstream.timeout", q, r.ghostBound(q))
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			r.violate("transport", "%s: %v", q, err)
		}
		return
	}
	q.Got, q.GotRetryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	r.chk.Edges(q, resp)
	if n := hints.Load(); n > relay.MaxRelayed {
		r.violate("interim", "%s: %d 1xx relayed, at most %d", q, n, relay.MaxRelayed)
	}
	r.checkContinues(q, int(continues.Load()), resp.StatusCode)
	body, err := check.ReadBody(resp)
	resp.Body.Close()
	end := check.Now()
	if err != nil && r.brokenOff(err) {
		// A body the origin broke off reaches the client broken (RFC
		// 9112 §8): the right outcome. One that reads whole but short
		// fails its stamp's JSON below.
		return
	}
	if err != nil && q.Ghost && timedOut(err) && ctx.Err() == nil {
		r.violate("held", "%s: the body was still open %v after it was sent: its key's lease, left by a crashed holder, held it past the lease's ttl and upstream.timeout", q, r.ghostBound(q))
		return
	}
	if err != nil && r.cfg.Mix.Has("stall") && timedOut(err) {
		r.violate("held", "%s: the body was still open at the client's own timeout: %v", q, err)
		return
	}
	if err != nil {
		r.violate("garbled", "%s: reading the answer: %v", q, err)
		return
	}
	if held && resp.StatusCode >= 500 {
		after, ok := r.unreadable(ctx, q.Replica)
		if !ok {
			return
		}
		q.Unreadable = after != before // held.go
		if q.HeldAtSend {
			now, ok := r.heldCopies(ctx, q.Replica, heldIDs(q))
			if !ok {
				return
			}
			q.Held = heldThroughout(copies, now)
		}
	}
	if q.Ghost {
		r.checkGhost(q, resp) // ghost.go
	}
	r.chk.Trailers(q, resp)
	r.chk.Answer(q, resp, body, start, end)
	r.readTagged(ctx, q, base, "read after a write", "tagged-read-")
}

// doHalfClosed sends q's request on a connection of its own from q's
// identity's address and shuts the connection's sending side once it is
// written. A client that half-closes is gone to the sidecar as much as one
// that closed (a read cannot tell them apart): a request that has to wait
// is sent nothing; one answered at once may be sent its answer, which must
// then be whole and right. Before, net/http's implicit empty 200 reached
// such a client as if it were the answer.
func (r *run) doHalfClosed(ctx context.Context, q *traffic.Request, req *http.Request) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(q.Who.Addr)}, Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", req.URL.Host)
	if err != nil {
		r.violate("transport", "%s: half-close: %v", q, err)
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	start := check.Now()
	if err := req.Write(conn); err != nil {
		r.violate("transport", "%s: half-close: %v", q, err)
		return
	}
	conn.(*net.TCPConn).CloseWrite()
	br := bufio.NewReader(conn)
	if _, err := br.Peek(1); errors.Is(err, io.EOF) {
		r.chk.Count("half-close-none", 1) // sent nothing: the client is gone
		r.gone.Add(1)                     // its flight goes on (settle)
		return
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		r.violate("garbled", "%s: half-close: reading the answer: %v", q, err)
		return
	}
	r.chk.Count("half-close-"+resp.Status[:3], 1)
	body, err := check.ReadBody(resp)
	resp.Body.Close()
	end := check.Now()
	if err != nil {
		if r.brokenOff(err) {
			return
		}
		r.violate("garbled", "%s: half-close: reading the answer: %v", q, err)
		return
	}
	r.chk.Answer(q, resp, body, start, end)
}

// doTrickled sends q's write to the trickle replica (Config.Trickle) on
// a connection of its own with half of its body, and no more (behind
// Expect: 100-continue, once the 100 came). The origin
// applies the write as its header arrives and then waits for the rest
// (origin.TrickleHeader); the sidecar must cut the body at its
// read_timeout and answer 408 with the connection closed (RFC 9110
// §15.5.9), never a success, and invalidate as for a write that may have
// been applied: the reads through the other replicas are held to the
// version the origin made, as for a write acknowledged (max-lag). Before
// the 408, net/http's implicit empty 200 told such a client its write
// was done.
func (r *run) doTrickled(ctx context.Context, q *traffic.Request, req *http.Request) {
	u, err := url.Parse(r.cfg.Trickle)
	if err != nil {
		r.violate("harness", "%s: trickle replica %q: %v", q, r.cfg.Trickle, err)
		return
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(q.Who.Addr)}, Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		r.violate("transport", "%s: trickle: %v", q, err)
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	id := fmt.Sprintf("trickle-%d-%d", r.cfg.Seed, r.trickleIDs.Add(1))
	req.Header.Set(origin.TrickleHeader, id)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", req.Method, req.URL.RequestURI(), req.Host, len(q.Body))
	req.Header.Write(&b)
	b.WriteString("\r\n")
	half := q.Body[:len(q.Body)/2]
	if !q.Expect {
		b.WriteString(half)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		r.violate("transport", "%s: trickle: %v", q, err)
		return
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	continues := 0
	if err == nil && q.Expect && resp.StatusCode == http.StatusContinue {
		continues++
		// Behind Expect: 100-continue, the half goes once the 100 came
		// (RFC 9110 §10.1.1). The 408 may already follow it: a write
		// that fails then is no matter.
		_, _ = io.WriteString(conn, half)
		resp, err = http.ReadResponse(br, req)
	}
	// More 1xx may come before the answer (RFC 9110 §15.2): a second 100
	// too, the upstream's relayed beside net/http's own (checkContinues).
	for n := 0; err == nil && resp.StatusCode < 200 && n <= relay.MaxRelayed; n++ {
		if resp.StatusCode == http.StatusContinue {
			continues++
		}
		resp, err = http.ReadResponse(br, req)
	}
	if err != nil {
		r.violate("trickle", "%s: no answer: %v", q, err)
		return
	}
	r.checkContinues(q, continues, resp.StatusCode)
	resp.Body.Close()
	end := check.Now()
	kind := "trickle-"
	if q.Expect {
		kind = "trickle-expect-"
	}
	r.chk.Count(kind+resp.Status[:3], 1)
	w, applied := r.cfg.Origin.TrickledWrite(id)
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode <= 299:
		r.violate("trickle", "%s: body cut halfway, answered %s (Via %q): a write that never arrived whole told it succeeded", q, resp.Status, resp.Header.Get("Via"))
	case applied && (resp.StatusCode != http.StatusRequestTimeout || !resp.Close):
		r.violate("trickle", "%s: body cut halfway, answered %s (Connection: close %v), want 408 and the connection closed", q, resp.Status, resp.Close)
	}
	if applied {
		// Held as a write acknowledged through the trickle replica:
		// max-lag on the others, own-write on the read below.
		r.chk.Acknowledge(w.Res, q.Path, w.Ver, end, len(r.cfg.Replicas))
		r.readAfterTrickle(ctx, q)
	}
}

// readAfterTrickle reads q's resource back through the trickle replica
// once its trickled write was answered: the replica's L1 holds nothing
// (it serves no other read), so a copy the cut write did not invalidate
// comes from L2, and is an own-write violation.
func (r *run) readAfterTrickle(ctx context.Context, q *traffic.Request) {
	rq := *q
	rq.Method, rq.Kind, rq.Body, rq.Trickle, rq.Replica = http.MethodGet, "read", "", false, len(r.cfg.Replicas)
	rq.Override = "" // a read: its method as it is (write-method-override)
	// Its own request, not the write's X-Request-Id: the resend check
	// counts an id's calls, and the write's already reached the origin.
	rq.Hdr, rq.Rid = q.Hdr.Clone(), ""
	rq.Hdr.Del("X-Request-Id")
	r.readBack(ctx, &rq, r.cfg.Trickle, "read after a trickled write", "trickle-read-")
}

// readBack sends rq, a read the round did not draw, to base, counts its
// status under count, and checks its answer as any other (own writes,
// max lag, identity): what a write's or purge's acknowledgement promised.
// It returns the status and Cache-Status (0 and "" when no whole answer
// came).
func (r *run) readBack(ctx context.Context, rq *traffic.Request, base, what, count string) (status int, cacheStatus string) {
	req, err := r.gen.HTTPRequest(ctx, rq, base)
	if err != nil {
		r.violate("harness", "%s: %v", rq, err)
		return 0, ""
	}
	for k, vs := range rq.Hdr {
		req.Header[k] = vs
	}
	start := check.Now()
	resp, err := rq.Who.Client.Do(req)
	if err != nil {
		r.violate("transport", "%s: %s: %v", rq, what, err)
		return 0, ""
	}
	body, err := check.ReadBody(resp)
	resp.Body.Close()
	end := check.Now()
	if err != nil {
		if !r.brokenOff(err) {
			r.violate("garbled", "%s: %s: %v", rq, what, err)
		}
		return 0, ""
	}
	r.chk.Count(count+resp.Status[:3], 1)
	r.chk.Answer(rq, resp, body, start, end)
	return resp.StatusCode, resp.Header.Get("Cache-Status")
}

// doAsterisk sends q's request with the target * (asterisk-form) instead
// of its path, without a body, on a connection of its own. RFC 9112
// §3.2.4 allows * for OPTIONS only: the sidecar answers 400 and closes
// (as NGINX), and the answer must be its own (no Via, which every answer
// relayed from the origin carries). Before, it was forwarded as "/%2A",
// a path the client never sent, and the origin's answer relayed.
func (r *run) doAsterisk(ctx context.Context, q *traffic.Request, req *http.Request) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(q.Who.Addr)}, Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", req.URL.Host)
	if err != nil {
		r.violate("transport", "%s: asterisk-form: %v", q, err)
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	req.URL.Opaque, req.URL.RawQuery = "*", ""
	req.Body, req.ContentLength, req.Trailer = nil, 0, nil
	req.Header.Del("Expect")
	br := bufio.NewReader(conn)
	// First OPTIONS *, the one method * may go with: the sidecar's own
	// 200 naming what it allows (edge.Guard; net/http's own answer is
	// off, so requests and header sections keep one numbering), no
	// upstream call, the connection kept for the request after it.
	opts := &http.Request{Method: http.MethodOptions, URL: &url.URL{Opaque: "*"}, Host: req.Host, Header: http.Header{}, ProtoMajor: 1, ProtoMinor: 1}
	if err := opts.Write(conn); err != nil {
		r.violate("transport", "%s: asterisk-form: OPTIONS *: %v", q, err)
		return
	}
	oresp, err := http.ReadResponse(br, opts)
	if err != nil {
		r.violate("asterisk-form", "%s: OPTIONS *: no answer: %v", q, err)
		return
	}
	oresp.Body.Close()
	r.chk.Count("asterisk-form-options-"+oresp.Status[:3], 1)
	if oresp.StatusCode != http.StatusOK || oresp.Close || oresp.Header.Get("Allow") == "" || oresp.Header.Get("Via") != "" {
		r.violate("asterisk-form", "%s: OPTIONS * answered %s (Connection: close %v, Allow %q, Via %q), want the sidecar's own 200 with Allow, the connection kept", q, oresp.Status, oresp.Close, oresp.Header.Get("Allow"), oresp.Header.Get("Via"))
		return
	}
	if err := req.Write(conn); err != nil {
		r.violate("transport", "%s: asterisk-form: %v", q, err)
		return
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		r.violate("asterisk-form", "%s: no answer: %v", q, err)
		return
	}
	resp.Body.Close()
	r.chk.Count("asterisk-form-"+resp.Status[:3], 1)
	if resp.StatusCode != http.StatusBadRequest || !resp.Close || resp.Header.Get("Via") != "" {
		r.violate("asterisk-form", "%s: answered %s (Connection: close %v, Via %q), want the sidecar's 400 and the connection closed", q, resp.Status, resp.Close, resp.Header.Get("Via"))
	}
}

// doFolded sends q's request with an obs-fold in its header section, on
// a connection of its own: "X-Fold: a" followed by a line starting with
// a space, " Transfer-Encoding: chunked" (a write's body then framed by
// its Content-Length, as net/http joins the line into X-Fold), or a tab
// and a value. RFC 9112 §5.2: the sidecar answers 400 and closes (as
// NGINX), its own answer (no Via, its text). Before, net/http joined the
// line and the request was forwarded, framed otherwise than a front
// proxy that read the folded line as a field of its own would frame it.
// q.Lead goes first on the connection (obs-fold-lead): empty lines,
// ignored (RFC 9112 §2.2), and an oddly framed OPTIONS that the sidecar
// answers 200 itself, keeping the connection; the fold after it is
// refused all the same (a fold scan that lost the odd framing let it
// through, and net/http answered an empty line 400).
func (r *run) doFolded(ctx context.Context, q *traffic.Request, req *http.Request) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(q.Who.Addr)}, Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", req.URL.Host)
	if err != nil {
		r.violate("transport", "%s: obs-fold: %v", q, err)
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	req.Header.Set("X-Fold", "a")
	var b bytes.Buffer
	if err := req.Write(&b); err != nil {
		r.violate("transport", "%s: obs-fold: %v", q, err)
		return
	}
	fold := "X-Fold: a\r\n\tb\r\n"
	if req.ContentLength > 0 {
		fold = "X-Fold: a\r\n Transfer-Encoding: chunked\r\n"
	}
	if _, err := io.WriteString(conn, q.Lead+strings.Replace(b.String(), "X-Fold: a\r\n", fold, 1)); err != nil {
		r.violate("transport", "%s: obs-fold: %v", q, err)
		return
	}
	br := bufio.NewReader(conn)
	if q.LeadKind != "" {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			r.violate("obs-fold", "%s: no answer to the lead: %v", q, err)
			return
		}
		resp.Body.Close()
		r.chk.Count("obs-fold-lead-"+q.LeadKind+"-"+resp.Status[:3], 1)
		if resp.StatusCode != http.StatusOK || resp.Close || resp.Header.Get("Allow") == "" {
			r.violate("obs-fold", "%s: the lead answered %s (Connection: close %v, Allow %q), want the sidecar's own 200 to OPTIONS with Max-Forwards: 0, the connection kept", q, resp.Status, resp.Close, resp.Header.Get("Allow"))
			return
		}
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		r.violate("obs-fold", "%s: no answer: %v", q, err)
		return
	}
	text, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	resp.Body.Close()
	r.chk.Count("obs-fold-"+resp.Status[:3], 1)
	own := req.Method == http.MethodHead || string(text) == "obsolete line folding\n" // the sidecar's text (none to a HEAD)
	if resp.StatusCode != http.StatusBadRequest || !resp.Close || resp.Header.Get("Via") != "" || !own {
		r.violate("obs-fold", "%s: answered %s %q (Connection: close %v, Via %q), want the sidecar's 400 for the fold and the connection closed", q, resp.Status, text, resp.Close, resp.Header.Get("Via"))
	}
}

// checkContinues: at most one 100 Continue reaches a client per request
// (net/http's own, as the sidecar reads a body asked for behind Expect:
// 100-continue), and a final answer follows it (RFC 9110 §15.2). An
// upstream's own 100 answers the sidecar's request (relay.Guard,
// relay.Interim drop it): relayed, a client behind Expect got two, and
// one that never asked got them all (origin-continue).
func (r *run) checkContinues(q *traffic.Request, n, final int) {
	if n > 0 {
		r.chk.Count(fmt.Sprintf("continue-got-%d", n), 1)
	}
	if n > 1 {
		r.violate("continue", "%s: %d 100 Continue reached the client, at most one per request", q, n)
	}
	if final < 200 {
		r.violate("continue", "%s: no final answer after the interim ones (last %d)", q, final)
	}
}

// brokenOff: err is a body the origin broke off (truncate) or stopped
// sending (stall, cut by the sidecar at upstream.timeout), read as broken.
func (r *run) brokenOff(err error) bool {
	return (r.cfg.Mix.Has("truncate") || r.cfg.Mix.Has("stall")) && errors.Is(err, io.ErrUnexpectedEOF)
}

// timedOut: err is the client's own time limit, not the sidecar's doing.
func timedOut(err error) bool {
	var te interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &te) && te.Timeout()
}
