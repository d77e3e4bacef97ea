package proxy

import (
	"net/http"

	"github.com/sidecache/sidecache/internal/relay"
)

// Interim responses (RFC 9110 §15.2) on the cached path: a 1xx the upstream
// sends before its answer — 103 Early Hints (RFC 8297) above all — is
// relayed at once to the client whose request made the fetch, while that
// client waits for the flight (internal/relay). It is never stored, so hits
// do not repeat it, and requests collapsed onto another's fetch do not get
// it (they may be waiting on another replica's fetch, or none).
// Pass-through relays 1xx itself (internal/lean, httputil.ReverseProxy).

// relayInterim opens the relay for x's client and returns the func that
// closes it for good (none for a miss of a batch route). The relay is carried by the exchange copies made
// after it, background refreshes included, which find it closed.
func (x *exchange) relayInterim() func() {
	if x.batched() {
		// Its miss is loaded through a bulk call (fillUpstream), which
		// relays no client's 1xx: a relay would never be used.
		return func() {}
	}
	ir := relay.New(x.w, x.r, x.h.tagh.stripFrom, x.h.maxHdr)
	x.interim = ir
	return ir.Close
}

// withInterim attaches the relay to the outgoing request of a fetch.
func (x *exchange) withInterim(out *http.Request) *http.Request { return x.interim.Attach(out) }
