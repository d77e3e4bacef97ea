package proxy

import (
	"net/http"

	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/lean"
	"github.com/sidecache/sidecache/internal/relay"
	"github.com/sidecache/sidecache/internal/upfail"
)

// leanPass is passWith's lean form: the common pass-through (lean.Client
// Takes it) sent on the handler's goroutine over internal/lean's pool, with
// what the ReverseProxy's hooks (internal/passproxy) do around it — the
// upstream metric and access-log time, tag headers stripped, Cache-Status,
// and a 504/502 for a timeout/any other failure. write has no lean form: its
// request may carry a body and its outcome must reach after.
func (x *exchange) leanPass(st status) {
	r, w := x.r, x.w
	resp, c, err := x.st.lean.RoundTrip(r.Context(), r, x.relay1xx)
	if err != nil {
		if r.Context().Err() != nil {
			return // there is no one to answer
		}
		x.rs.m.Upstream(0, x.h.now().Sub(x.start))
		ue := upfail.Classify(err)
		x.h.logUpstream(r, x.rs.m.Name(), ue.Code, err)
		upfail.Write(w, ue, st)
		return
	}
	took := x.h.now().Sub(x.start)
	x.rs.m.Upstream(resp.StatusCode, took)
	if x.rec != nil {
		x.rec.Upstream = took
	}
	x.h.tagh.StripFrom(resp.Header)
	st.FwdStatus = resp.StatusCode
	resp.Header["Cache-Status"] = []string{httpcache.AppendCacheStatus(resp.Header.Get("Cache-Status"), st.String())}
	httpcache.AddVia(resp.Header, x.h.via)
	buf := x.h.bufs.Take()
	err = lean.WriteResponse(w, resp, c, *buf, x.h.trailers)
	x.h.bufs.Return(buf)
	if err != nil {
		c.Close()
		if r.Context().Value(http.ServerContextKey) != nil {
			// As ReverseProxy: the client must see the answer broken,
			// not a short one that looks whole.
			panic(http.ErrAbortHandler)
		}
		return
	}
	x.st.lean.Put(c)
}

// relay1xx passes an upstream's 1xx on to the client at once
// (RFC 9110 §15.2), without the tag headers, and keeps none of its fields
// for the final answer (relay.Write); within the request's relay.Gate,
// and never a 100 (relay.Relays: it answers the sidecar's request; a GET
// got the upstream's every 100 relayed).
func (x *exchange) relay1xx(code int, h http.Header) {
	if relay.Relays(code) && x.gate.Admit(x.r, h) {
		relay.Write(x.w, code, h, x.h.tagh.StripFrom)
	}
}
