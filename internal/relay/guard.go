package relay

import "net/http"

// Guard is w for httputil.ReverseProxy, whose Got1xxResponse hook copies
// a 1xx answer's fields straight into w's header (ModifyResponse sees only
// the final answer): each 1xx passes r's Gate (none to an HTTP/1.0 client,
// a bounded number) and leaves without the fields strip removes (the
// upstream's surrogate keys; nil: none). A 101 is an upgrade's final
// answer, not an interim one, and passes untouched. Unwrap keeps
// ResponseController's Flush and Hijack working through it.
func Guard(w http.ResponseWriter, r *http.Request, strip func(http.Header)) http.ResponseWriter {
	return &guarded{ResponseWriter: w, r: r, strip: strip}
}

type guarded struct {
	http.ResponseWriter
	r     *http.Request
	strip func(http.Header)
	gate  Gate
}

func (g *guarded) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		// A 100 is the upstream's, to the sidecar's own request
		// (Relays): the client's came from net/http's server as the
		// body was read.
		if !Relays(code) || !g.gate.Admit(g.r, g.Header()) {
			return // ReverseProxy clears the 1xx's fields after
		}
		if g.strip != nil {
			g.strip(g.Header())
		}
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *guarded) Unwrap() http.ResponseWriter { return g.ResponseWriter }
