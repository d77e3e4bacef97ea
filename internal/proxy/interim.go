package proxy

import (
	"maps"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"

	"github.com/sidecache/sidecache/internal/httpcache"
)

// Interim responses (RFC 9110 §15.2) on the cached path: a 1xx the upstream
// sends before its answer — 103 Early Hints (RFC 8297) above all — is
// relayed at once to the client whose request made the fetch, so its
// browser can start preloading while the upstream works. It is never
// stored, so hits do not repeat it, and requests collapsed onto another's
// fetch do not get it (they may be waiting on another replica's fetch, or
// none). Pass-through relays 1xx already (httputil.ReverseProxy).
//
// The fetch can outlive its client (the flight goes on for the others), so
// the relay is open only while that client waits for the flight.
type interim struct {
	mu    sync.Mutex
	w     http.ResponseWriter
	open  bool
	strip func(http.Header)
}

// relayInterim opens the relay for x's client and returns the func that
// closes it for good. The relay is carried by the exchange copies made
// after it, background refreshes included, which find it closed.
func (x *exchange) relayInterim() func() {
	ir := &interim{w: x.w, open: true, strip: x.h.tagh.stripFrom}
	x.interim = ir
	return ir.close
}

func (ir *interim) close() {
	ir.mu.Lock()
	ir.open = false
	ir.mu.Unlock()
}

// withInterim attaches the relay to the outgoing request of a fetch.
func (x *exchange) withInterim(out *http.Request) *http.Request {
	ir := x.interim
	if ir == nil {
		return out
	}
	trace := &httptrace.ClientTrace{Got1xxResponse: ir.got}
	return out.WithContext(httptrace.WithClientTrace(out.Context(), trace))
}

// got writes one interim response to the client, if it still waits. 100
// Continue answers the sidecar's own request, never the client's; 101 is a
// final status (and never reaches here).
func (ir *interim) got(code int, header textproto.MIMEHeader) error {
	if code == http.StatusContinue || code == http.StatusSwitchingProtocols {
		return nil
	}
	ir.mu.Lock()
	defer ir.mu.Unlock()
	if !ir.open {
		return nil
	}
	// The ResponseWriter sends its header map with a 1xx and keeps it for
	// the final answer; send the 1xx's fields alone, then put back what
	// was there.
	dst := ir.w.Header()
	saved := maps.Clone(dst)
	clear(dst)
	for k, vs := range header {
		dst[k] = vs
	}
	httpcache.RemoveHopHeaders(dst)
	ir.strip(dst)
	ir.w.WriteHeader(code)
	clear(dst)
	maps.Copy(dst, saved)
	return nil
}
