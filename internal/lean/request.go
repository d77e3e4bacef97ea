package lean

import (
	"bufio"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/sidecache/sidecache/internal/clientaddr"
	"github.com/sidecache/sidecache/internal/httpcache"
)

// writeRequest writes r as ReverseProxy with SetURL(base) and
// SetXForwarded would send it over http.Transport, without cloning r:
//
//   - the target is base's path and query joined with r's, the Host field
//     base's host;
//   - hop-by-hop fields and those Connection names are dropped: they
//     describe the client's connection, not this one (RFC 9110 §7.6.1);
//     Te is kept as "trailers" when the client asked for them, so the
//     upstream may send trailers to relay (RFC 9110 §6.5, §10.1.4);
//   - Forwarded and X-Forwarded-* are replaced, never appended to, from
//     r's connection: a client cannot pass a forged address on; so is
//     X-Real-Ip, and the other address claims are dropped (clientaddr);
//   - User-Agent is sent once, and never empty or Go's own when the
//     client sent none;
//   - Expect is not sent: the sidecar answers it (httpcache.IsExpect);
//   - CR and LF in a value become spaces, as http.Header.Write does, so a
//     value cannot start a field of its own.
func writeRequest(bw *bufio.Writer, r *http.Request, base *url.URL, host string) error {
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	if base.Path == "" && base.RawQuery == "" {
		bw.WriteString(r.URL.EscapedPath())
		if r.URL.RawQuery != "" || r.URL.ForceQuery {
			bw.WriteByte('?')
			bw.WriteString(r.URL.RawQuery)
		}
	} else {
		out := &http.Request{URL: new(url.URL), Header: http.Header{}}
		*out.URL = *r.URL
		(&httputil.ProxyRequest{In: r, Out: out}).SetURL(base)
		bw.WriteString(out.URL.RequestURI())
	}
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	conn := r.Header["Connection"]
	for k, vs := range r.Header {
		if httpcache.IsHopHeader(k) || httpcache.IsExpect(k) {
			continue // Te: trailers is written below; Expect is answered here
		}
		switch k {
		case "Host", "Content-Length", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto":
			continue
		case "User-Agent":
			if len(vs) > 0 && vs[0] != "" {
				bw.WriteString("User-Agent: ")
				headerValue(bw, vs[0])
				bw.WriteString("\r\n")
			}
			continue
		}
		if clientaddr.Replaced(k) || len(conn) > 0 && namedIn(conn, k) {
			continue
		}
		for _, v := range vs {
			bw.WriteString(k)
			bw.WriteString(": ")
			headerValue(bw, v)
			bw.WriteString("\r\n")
		}
	}
	if namedIn(r.Header["Te"], "trailers") {
		bw.WriteString("Te: trailers\r\n")
	}
	if ip := clientaddr.Peer(r.RemoteAddr); ip != "" {
		bw.WriteString("X-Forwarded-For: ")
		bw.WriteString(ip)
		bw.WriteString("\r\n" + clientaddr.RealIP + ": ")
		bw.WriteString(ip)
		bw.WriteString("\r\n")
	}
	bw.WriteString("X-Forwarded-Host: ")
	headerValue(bw, r.Host)
	if r.TLS != nil {
		bw.WriteString("\r\nX-Forwarded-Proto: https\r\n\r\n")
	} else {
		bw.WriteString("\r\nX-Forwarded-Proto: http\r\n\r\n")
	}
	return bw.Flush()
}

// headerValue writes v with CR and LF as spaces, as http.Header.Write does.
func headerValue(bw *bufio.Writer, v string) {
	if strings.ContainsAny(v, "\r\n") {
		v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
	}
	bw.WriteString(strings.TrimSpace(v))
}

// namedIn reports whether a list field (Connection, Te) names k
// (RFC 9110 §7.6.1, §10.1.4).
func namedIn(list []string, k string) bool {
	for _, f := range list {
		for name := range strings.SplitSeq(f, ",") {
			if strings.EqualFold(strings.TrimSpace(name), k) {
				return true
			}
		}
	}
	return false
}
