package traffic

import (
	"fmt"
	"strings"
)

// What a folded request's connection carries before it (obs-fold-lead,
// drawn on stream 36): empty lines, which a server SHOULD ignore before
// a request line (RFC 9112 §2.2), and a valid request framed oddly but
// as net/http frames it: a length after 130 blanks or of 19 digits, a
// chunk size of 16 hex digits, a 200-byte chunk extension or
// Transfer-Encoding line. That request is OPTIONS with Max-Forwards: 0,
// which the sidecar answers itself (200, no upstream call), keeping the
// connection. The fold after it must still be refused: a fold scan that
// gave up on the odd request (a 128-byte line, 18 digits) let every
// later request on the connection through unscanned, and net/http
// answered a leading empty line 400.

// leadKinds are the odd framings of the request in a lead ("": none).
var leadKinds = [...]string{"", "length-blanks", "length-digits", "chunk-hex", "chunk-ext", "te-blanks"}

// foldLead draws a folded request's lead and the framing of the request
// in it.
func (g *Gen) foldLead() (lead, kind string) {
	empty := func() string { return [...]string{"", "", "\r\n", "\n", "\r\n\r\n"}[g.leads.IntN(5)] }
	var b strings.Builder
	b.WriteString(empty())
	kind = leadKinds[g.leads.IntN(len(leadKinds))]
	if kind == "" {
		return b.String(), kind
	}
	fmt.Fprintf(&b, "OPTIONS /r/1 HTTP/1.1\r\nHost: %s\r\nMax-Forwards: 0\r\n", g.host)
	switch kind {
	case "length-blanks":
		b.WriteString("Content-Length:" + strings.Repeat(" ", 130) + "5\r\n\r\nhello")
	case "length-digits":
		b.WriteString("Content-Length: 0000000000000000005\r\n\r\nhello")
	case "chunk-hex":
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n0000000000000005\r\nhello\r\n0\r\n\r\n")
	case "chunk-ext":
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n5;" + strings.Repeat("x", 200) + "\r\nhello\r\n0\r\n\r\n")
	case "te-blanks":
		b.WriteString("Transfer-Encoding:" + strings.Repeat(" ", 200) + "chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
	}
	b.WriteString(empty())
	return b.String(), kind
}
