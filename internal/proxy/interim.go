package proxy

import (
	"net/http"
	"net/textproto"

	"github.com/sidecache/sidecache/internal/relay"
)

// Interim responses (RFC 9110 §15.2) on the cached path: a 1xx the upstream
// sends before its answer — 103 Early Hints (RFC 8297) above all — is
// relayed at once to the client whose request made the fetch, while that
// client waits for the flight (internal/relay). It is never stored, so hits
// do not repeat it, and requests collapsed onto another's fetch do not get
// it (they may be waiting on another replica's fetch, or none).
// Pass-through relays 1xx itself (internal/lean, httputil.ReverseProxy).

// relayInterim opens the relay for x's client and returns it, for the
// caller to close for good when it stops waiting (nil, whose Close does
// nothing, for a miss of a batch route). The relay is carried by the
// exchange copies made after it, background refreshes included, which find
// it closed. It costs one allocation, so it is opened only by a request
// whose fetch is about to be made (fillFirst, before the exchange is
// copied for it; a forced refresh; an own fetch, which gets it closed):
// an L2 hit, or a request that waits for another's flight, opens none
// (BenchmarkL2Hit: 13 -> 12 allocations).
func (x *exchange) relayInterim() *relay.Interim {
	if x.batched() {
		// Its miss is loaded through a bulk call (fillUpstream), which
		// relays no client's 1xx: a relay would never be used.
		return nil
	}
	x.interim = relay.New(x.w, x.r, x.h.stripTags, x.h.maxHdr)
	return x.interim
}

// sendFetch sends a fetch's outgoing request (state.send) with the relay
// as its 1xx hook: lean's, or the Transport's client trace.
func (x *exchange) sendFetch(out *http.Request) (*http.Response, error) {
	if x.st.lean.TakesOut(out) {
		var on1xx func(int, textproto.MIMEHeader) error
		if x.interim != nil {
			on1xx = x.interim.Got
		}
		return x.st.lean.Send(out, on1xx)
	}
	return x.st.transport.RoundTrip(x.interim.Attach(out))
}
