// Package relay passes an upstream's interim responses (RFC 9110 §15.2) —
// 103 Early Hints (RFC 8297) above all — on to the one client whose request
// made the fetch, at once, so its browser can start preloading while the
// upstream works.
//
// A cache's fetch can outlive the client it was made for (it goes on for
// the requests collapsed onto it), so the relay is open only while that
// client waits: Close shuts it for good, and a 1xx that arrives later is
// dropped. It never stores anything; a hit does not repeat a hint.
package relay

import (
	"errors"
	"maps"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"sync/atomic"

	"github.com/sidecache/sidecache/internal/httpcache"
)

// MaxRelayed and MaxRelayedBytes bound the interim responses one request
// relays: 103 Early Hints is meant to come once or twice (RFC 8297 §2),
// and its fields are bounded as a request's header is by default.
const (
	MaxRelayed      = 8
	MaxRelayedBytes = 64 << 10
)

// Gate is one request's count of relayed interim responses. Its zero
// value is ready.
type Gate struct {
	n     int
	bytes int64
}

// ErrTooMuch fails a fetch whose interim responses, relayed or not, went
// past the header bound: http.Transport resets its header bound at each
// 1xx a trace hook sees, so without this an upstream's endless 1xx would
// be read until the response-header timeout.
var ErrTooMuch = errors.New("relay: upstream 1xx responses exceed the header limit")

// Budget bounds the bytes of all the 1xx answers of one fetch. Safe for
// concurrent use (a trace hook may run on the transport's goroutine).
type Budget struct {
	max  int64
	seen atomic.Int64
}

// NewBudget bounds a fetch's 1xx answers to max bytes of fields.
func NewBudget(max int64) *Budget { return &Budget{max: max} }

// Spend counts h and returns ErrTooMuch once the fetch's 1xx are over the
// bound. A nil Budget bounds nothing.
func (b *Budget) Spend(h http.Header) error {
	if b == nil {
		return nil
	}
	if b.seen.Add(httpcache.HeaderBytes(h)) > b.max {
		return ErrTooMuch
	}
	return nil
}

// Admit reports whether a 1xx of fields h may be relayed to r's client,
// and counts it when it may.
func (g *Gate) Admit(r *http.Request, h http.Header) bool {
	if !r.ProtoAtLeast(1, 1) || g.n >= MaxRelayed {
		return false
	}
	b := httpcache.HeaderBytes(h)
	if g.bytes+b > MaxRelayedBytes {
		return false
	}
	g.n++
	g.bytes += b
	return true
}

// Interim relays 1xx responses to one client's ResponseWriter.
type Interim struct {
	mu    sync.Mutex
	w     http.ResponseWriter
	r     *http.Request
	open  bool
	gate  Gate
	spent Budget // in the relay: one allocation per cached request, not two
	strip func(http.Header)
}

// New opens a relay to w, r's ResponseWriter. strip removes the fields the
// client must not see beyond the hop-by-hop ones (the upstream's surrogate
// keys); nil: none. maxBytes bounds the fetch's 1xx answers in all (Budget).
func New(w http.ResponseWriter, r *http.Request, strip func(http.Header), maxBytes int64) *Interim {
	return &Interim{w: w, r: r, open: true, strip: strip, spent: Budget{max: maxBytes}}
}

// Close shuts the relay for good; it is safe to call more than once, and
// on a nil relay (none was opened).
func (ir *Interim) Close() {
	if ir == nil {
		return
	}
	ir.mu.Lock()
	ir.open = false
	ir.mu.Unlock()
}

// Attach returns out with the relay as its client trace's
// Got1xxResponse; a nil relay returns out as it is.
func (ir *Interim) Attach(out *http.Request) *http.Request {
	if ir == nil {
		return out
	}
	trace := &httptrace.ClientTrace{Got1xxResponse: ir.Got}
	return out.WithContext(httptrace.WithClientTrace(out.Context(), trace))
}

// Relays reports whether an upstream's interim response of code may be
// passed on to a client, the one rule of every path (Guard, Interim.Got,
// the proxy's lean loop): 100 Continue answers the sidecar's own request,
// never the client's (net/http's server sends the client's as the body
// is read, RFC 9110 §10.1.1), so relaying it gave a client behind Expect
// two and one that never asked any number; 101 is a final status.
func Relays(code int) bool {
	return code > http.StatusContinue && code < 200 && code != http.StatusSwitchingProtocols
}

// Got writes one interim response to the client, if the relay is open
// and Relays says it goes (101 never reaches a client trace's
// Got1xxResponse).
func (ir *Interim) Got(code int, header textproto.MIMEHeader) error {
	if !Relays(code) {
		return nil
	}
	if err := ir.spent.Spend(http.Header(header)); err != nil {
		return err
	}
	ir.mu.Lock()
	defer ir.mu.Unlock()
	if ir.open && ir.gate.Admit(ir.r, http.Header(header)) {
		Write(ir.w, code, http.Header(header), ir.strip)
	}
	return nil
}

// Write sends one interim response of fields h to w, without the
// hop-by-hop fields and those strip removes (nil: none). The
// ResponseWriter sends its header map with a 1xx and keeps it for the
// final answer, so the 1xx's fields go alone and what was there is put
// back after.
func Write(w http.ResponseWriter, code int, h http.Header, strip func(http.Header)) {
	dst := w.Header()
	saved := maps.Clone(dst)
	clear(dst)
	for k, vs := range h {
		dst[k] = vs
	}
	httpcache.RemoveHopHeaders(dst)
	if strip != nil {
		strip(dst)
	}
	w.WriteHeader(code)
	clear(dst)
	maps.Copy(dst, saved)
}
