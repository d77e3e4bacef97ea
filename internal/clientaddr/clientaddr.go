// Package clientaddr is the sidecar's one rule for the request fields that
// name the client's address to the upstream, on every path (lean and
// ReverseProxy pass-through, cached fill, large-body stream, batch, split,
// upgrades).
//
// The sidecar has no notion of a trusted proxy: it replaces X-Forwarded-For
// and Forwarded with the peer it saw (RFC 7239 §8.1 warns that a client can
// forge them). X-Real-Ip is the single-address form of the same claim, set
// by NGINX's `proxy_set_header X-Real-IP $remote_addr`, and applications
// behind NGINX trust it as the client's address; so the sidecar writes it
// too, from the same peer, replacing whatever the client sent. The other
// single-address claims that CDNs and load balancers write (True-Client-Ip,
// X-Client-Ip, X-Cluster-Client-Ip, Cf-Connecting-Ip, Fastly-Client-Ip,
// and the older and proxy-specific ones Replaced lists) could only come
// from a client here, so they are dropped: forwarded, they would spoof an
// address to an application that reads them.
//
// It exists apart because three builders write the upstream request (the
// lean writer, ReverseProxy's Rewrite, the cached path's upreq) and a rule
// kept three times drifts: the prober found X-Real-Ip: 6.6.6.6 at the
// origin on the two that forwarded client fields.
package clientaddr

import (
	"net"
	"net/http"
)

// RealIP is the field the sidecar writes with its peer's address.
const RealIP = "X-Real-Ip"

// Replaced reports whether a canonical field name is one a client's copy
// of never reaches the upstream: X-Real-Ip (the sidecar writes its own)
// and the dropped address claims: the CDNs' single-address ones, the
// older spellings frameworks still read (Rails' remote_ip reads
// Client-Ip, PHP code HTTP_CLIENT_IP first), the X-Forwarded family's
// members Rewrite does not replace (X-Forwarded-Port beside a rewritten
// X-Forwarded-Proto would contradict it), and the proxies' own (Envoy,
// Blue Coat). A switch, not a list scanned: it runs for every field of
// every lean request.
func Replaced(name string) bool {
	switch name {
	case RealIP,
		"True-Client-Ip", "X-Client-Ip", "X-Cluster-Client-Ip", "Cf-Connecting-Ip", "Fastly-Client-Ip",
		"Client-Ip", "X-Originating-Ip", "X-Remote-Ip", "X-Remote-Addr", "Forwarded-For",
		"X-Forwarded", "X-Original-Forwarded-For", "X-Forwarded-Port", "X-Forwarded-Ssl",
		"X-Forwarded-Scheme", "X-Forwarded-Server", "X-Envoy-External-Address", "X-Proxyuser-Ip":
		return true
	}
	return false
}

// Peer is the address the sidecar writes for a request from remoteAddr
// (http.Request.RemoteAddr): its host, as SetXForwarded puts last in
// X-Forwarded-For; "" when it does not parse (nothing is written then).
func Peer(remoteAddr string) string {
	ip, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return ""
	}
	return ip
}

// Set removes from h every field Replaced names, whatever a client sent,
// and sets X-Real-Ip to Peer(remoteAddr).
func Set(h http.Header, remoteAddr string) {
	for k := range h {
		if Replaced(k) {
			delete(h, k)
		}
	}
	if ip := Peer(remoteAddr); ip != "" {
		h[RealIP] = []string{ip}
	}
}
