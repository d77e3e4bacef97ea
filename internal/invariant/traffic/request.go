package traffic

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Request is one drawn client request and what its answer is checked
// against: the dimension values it sent, the resource the origin would
// answer for, and its budget of upstream calls.
type Request struct {
	Kind    string // read, write, list
	Route   string // r, p, t, u
	Replica int
	Who     *Identity
	Method  string
	Path    string // as sent, escaped
	Query   string // as sent, raw
	Hdr     http.Header
	Sent    map[string]string // dimension → value this request sent ("" none)
	Res     string
	Ids     []string // list
	Rid     string
	Host    string // Host header; "" is the run's Host
	Budget  int
	Hangup  bool // write-hangup: the client leaves once the request is sent
	// HalfClose: a read sent on a connection of its own whose client
	// shuts its sending side once the request is written (half-close).
	HalfClose bool
	// Absolute: sent in absolute-form (GET http://host/path, RFC 9112
	// §3.2.2) through the identity's proxy-configured client.
	Absolute bool
	// Asterisk: sent with the request target * (asterisk-form, RFC 9112
	// §3.2.4), without its body, on a connection of its own.
	Asterisk bool
	// Folded: sent with an obs-fold in its header section (RFC 9112
	// §5.2), on a connection of its own. Lead: what that connection
	// carries before it (foldlead.go), LeadKind the odd framing of the
	// request in it ("": none).
	Folded         bool
	Lead, LeadKind string
	// Body: a write's body; Chunked: sent chunked with trailers; Expect:
	// with Expect: 100-continue.
	Body            string
	Chunked, Expect bool
	// Trickle: a write sent to the run's short-read_timeout replica
	// whose body stops halfway (send.go, doTrickled).
	Trickle bool
	// Deaf: a write whose 64 MiB body the origin never reads; BadChunk:
	// one whose chunked body has a chunk size past 2^63 (the client-body
	// row, internal/invariant/clientbody.go).
	Deaf, BadChunk bool
	// Override is how a write the origin applies as PATCH spells its
	// method on the wire (write-method-override, override.go): "" as
	// PATCH, else one of Overrides.
	Override string
	// MethodCase is how a read or list spells its method on the wire
	// when it is a case variant of it (read-method-case, methodcase.go:
	// "get", "Head"); "": as Method.
	MethodCase string
	// Tagged is the path of a read tagged as a write's resource
	// (/r/{id}/summary), sent through the write's replica before and
	// after it (route-tagged-read, respell.go).
	Tagged string
	// Cond is the conditional this request sent (conditional.go).
	Cond Cond
	// Crowd: sent in a crowd round (CrowdRequest), over a healthy origin.
	// Began is when that round began: its ids are fresh, so no batch
	// holding them opened before (check: a timeout's 504).
	Crowd bool
	// After, when not nil, holds the request until it is closed (a queue
	// round's second wave: the runner's queue.go).
	After <-chan struct{}
	// Got and GotRetryAfter are the status and Retry-After of the answer
	// the client read (0: none), set by the sender for the runner's
	// round-wide checks.
	Got           int
	GotRetryAfter string
	Began         time.Time
	// Unreadable: while this request was answered, its replica could
	// not read some stored entry: the coherence bound refused one
	// (its proof older than max_lag: the heartbeats came back late),
	// or an L2 read failed (the runner's held.go). Set by the sender
	// for route s's stale-if-error check (check/stale.go).
	Unreadable bool
	// HeldAtSend: when this route s request was sent, its replica held a
	// copy of each of its ids it could serve stale (admin GET /cache);
	// Held: it failed, and each of those copies was still held after
	// (the same entry: tier, key, stored_at). Set by the sender (the
	// runner's held.go) for check/stale.go.
	HeldAtSend, Held bool
	// Ghost: the lease of this request's key (a list's: of each of its
	// ids) was left in Redis by a holder that crashed (the runner's
	// ghost-lease row, ghost.go).
	Ghost bool
}

func (q *Request) String() string {
	u := q.Path
	if q.Query != "" {
		u += "?" + q.Query
	}
	var h []string
	for _, k := range []string{"Accept-Encoding", "Accept-Language", "X-Tenant", "Cookie", "Authorization", "Cache-Control", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "User-Agent"} {
		if vs, ok := q.Hdr[k]; ok {
			v := strings.Join(vs, "|")
			if len(v) > 40 {
				v = v[:40] + "…"
			}
			h = append(h, k+"="+v)
		}
	}
	for _, k := range []string{"Range", "Expect"} {
		if v := q.Hdr.Get(k); v != "" {
			h = append(h, k+"="+v)
		}
	}
	if q.Absolute {
		u = "http://" + q.Host + u
	}
	if q.Asterisk {
		u = "* (" + u + ")"
	}
	if q.Folded {
		h = append(h, "obs-fold")
		if q.Lead != "" {
			h = append(h, fmt.Sprintf("lead=%q+%s", q.Lead[:len(q.Lead)-len(strings.TrimLeft(q.Lead, "\r\n"))], q.LeadKind))
		}
	}
	if q.Expect && q.Hdr.Get("Expect") == "" {
		// HTTPRequest sets it on the request, not in Hdr.
		h = append(h, "Expect=100-continue")
	}
	if q.Chunked {
		h = append(h, "chunked+trailers")
	}
	if q.Override != "" {
		h = append(h, "method-as="+q.Override) // HTTPRequest spells the method so
	}
	if q.MethodCase != "" {
		h = append(h, "method-as="+q.MethodCase)
	}
	return fmt.Sprintf("%s(%s)@replica%d %s %s [%s]", q.Who.Name, q.Who.Addr, q.Replica, q.Method, u, strings.Join(h, " "))
}

// proxyKey carries the replica an absolute-form request goes through.
type proxyKey struct{}

// viaProxy is the proxied client's Proxy: the replica the request's
// context names, so the request line is absolute-form.
func viaProxy(req *http.Request) (*url.URL, error) {
	u, _ := req.Context().Value(proxyKey{}).(*url.URL)
	return u, nil
}

// HTTPRequest builds q's request to replica base: origin-form to the
// replica, or absolute-form through it; a write's body, chunked with
// trailers or behind Expect: 100-continue.
func (g *Gen) HTTPRequest(ctx context.Context, q *Request, base string) (*http.Request, error) {
	target := base + q.Path
	if q.Absolute {
		pu, err := url.Parse(base)
		if err != nil {
			return nil, err
		}
		ctx = context.WithValue(ctx, proxyKey{}, pu)
		host := g.host
		if q.Host != "" {
			host = q.Host
		}
		target = "http://" + host + q.Path
	}
	var body io.Reader
	if q.Body != "" {
		body = strings.NewReader(q.Body)
	}
	req, err := http.NewRequestWithContext(ctx, q.Method, target, body)
	if err != nil {
		return nil, err
	}
	req.URL.RawQuery = q.Query
	if !q.Absolute {
		req.Host = g.host
		if q.Host != "" {
			req.Host = q.Host
		}
	}
	if q.Body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	spellMethod(req, q) // override.go
	if q.MethodCase != "" {
		req.Method = q.MethodCase // methodcase.go
	}
	if q.Chunked {
		req.ContentLength = -1
		req.Body = io.NopCloser(strings.NewReader(q.Body)) // unknown length: chunked
		req.GetBody = nil
		// A trailer naming a tag header and one naming a field that
		// may not be a trailer (RFC 9110 §6.5.1): both must be dropped.
		req.Trailer = http.Header{"Surrogate-Key": {"r:1 r:2 r:3 r:4"}, "Cache-Control": {"no-store"}, "X-Sum": {"1"}}
	}
	if q.Expect {
		req.Header.Set("Expect", "100-continue")
	}
	return req, nil
}

// Budget of upstream requests, per client request: a read (per-ID batch
// read included) may cost its fetch and one more fetch after learning a
// Vary'd header it had withheld (README: "asked once more") or after
// taking over a lapsed lease; a write one request; a list of n IDs
// 2 + 2·⌈log2 n⌉ (a bulk call plus isolating a bad ID, issue 20.4). The
// harness sums the budgets of a round's concurrent requests and compares
// the sum with the requests the origin received during the round.
//
// A request sent once more after the origin hung up on a reused
// connection (RFC 9112 §9.3.1: Go's transport does so for an idempotent
// request) carries the X-Request-Id of the first send and is counted
// apart (Origin.Resends), bounded by the resend check (MaxSends per id),
// not by these budgets: Go's transport alone resends for as long as the
// connection it takes is a reused one, which internal/resend stops after
// one resend. (A resend of a pass-through request that carries no id is
// counted here: one lean pass-through read, 2.)
const (
	BudgetRead  = 2
	BudgetWrite = 1
)

// BudgetList is the budget of a list request of n IDs.
func BudgetList(n int) int {
	b := 2
	for m := 1; m < n; m *= 2 {
		b += 2
	}
	return b
}
