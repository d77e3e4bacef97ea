package sendbound

import (
	"net"
	"net/http"
	"net/http/httptrace"
)

// Switched returns rt (an http.Transport whose connections Wrap bounds)
// with the bound lifted from a connection once an answer switched it to
// another protocol (101, RFC 9110 §15.2.2): the tunnel that follows has
// bounds of its own (upstream.tunnel_idle_timeout, which counts a write
// blocked that long as silence), and upstream.timeout, sized for an API
// call, is not one of them. The connection is found as the Transport
// hands it to a client trace (GotConn), through the wrappers that have a
// NetConn method; the bound is lifted before the answer is returned, so
// before anyone writes to the tunnel. CloseIdleConnections reaches rt's.
func Switched(rt http.RoundTripper) http.RoundTripper { return switched{rt: rt} }

type switched struct{ rt http.RoundTripper }

func (s switched) RoundTrip(r *http.Request) (*http.Response, error) {
	if _, upgrade := r.Header["Upgrade"]; !upgrade {
		return s.rt.RoundTrip(r)
	}
	var conn net.Conn // the last one taken: the one the answer came on
	r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { conn = info.Conn },
	}))
	resp, err := s.rt.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusSwitchingProtocols {
		if c := find(conn); c != nil {
			c.Lift()
		}
	}
	return resp, err
}

// find is the *Conn under c's wrappers, nil if there is none.
func find(c net.Conn) *Conn {
	for c != nil {
		if b, ok := c.(*Conn); ok {
			return b
		}
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = w.NetConn()
	}
	return nil
}

// CloseIdleConnections closes rt's idle connections.
func (s switched) CloseIdleConnections() {
	if c, ok := s.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
