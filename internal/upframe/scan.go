// Package upframe holds the checks every path applies to an upstream's
// answer before anything of it is stored or relayed, whichever client made
// the call (internal/lean's loops, or an http.Transport's, which
// ReverseProxy, the fill and the bulk call take):
//
//   - scan.go, conn.go: a header section with both Content-Length and
//     Transfer-Encoding (RFC 9112 §6.3: "ought to be handled as an
//     error"), which net/http reads by the chunked framing after deleting
//     Content-Length, so no caller could tell;
//   - check.go: a 304 Not Modified to a request that carried no
//     condition (RFC 9110 §15.4.5), and the RoundTripper that applies
//     both.
package upframe

import "bytes"

// Scanner watches the bytes read on one upstream connection for the
// header sections of an answer, from a request's write (Arm) to the end
// of the answer's final header section, and notes whether that section
// carried Content-Length and Transfer-Encoding both. It looks at the start
// of each line only, and stops at the final section's empty line: the
// body is never read as fields. Bytes that do not start with a status
// line ("HTTP/") end the watch at once: they are a body's, read after a
// late write of the request's own body re-armed it. Not safe for
// concurrent use (Conn locks it).
type Scanner struct {
	state   uint8
	line    [len("transfer-encoding:")]byte
	n       int  // bytes of the current line kept (up to len(line))
	skip    bool // the current line is neither field nor an empty line
	status  bool // the current line is a section's status line
	interim bool // the current section is a 1xx's (another follows)
	cl, te  bool // in the current section
	both    bool // the final section had both
}

const (
	idle   = iota // between answers: bytes read are a body's
	armed         // a request was written: the next bytes start an answer
	header        // in an answer's header sections
)

var (
	clName = []byte("content-length:")
	teName = []byte("transfer-encoding:")
)

// Arm marks a request written: the next bytes read start its answer. A
// write while an answer's header is still being read (the rest of a
// request body, after a 100 Continue) changes nothing.
func (s *Scanner) Arm() {
	if s.state == idle {
		s.state = armed
	}
}

// Ambiguous reports whether the final header section of the last answer
// carried both Content-Length and Transfer-Encoding.
func (s *Scanner) Ambiguous() bool { return s.both }

// Feed scans p, bytes read after the last Arm.
func (s *Scanner) Feed(p []byte) {
	if s.state == armed {
		*s = Scanner{state: header, status: true}
	}
	for s.state == header && len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		if s.n == 0 && !s.skip && !s.status && len(seg) > 0 {
			switch seg[0] {
			case 'c', 'C', 't', 'T', '\r':
			default:
				s.skip = true
			}
		}
		if !s.skip && s.n < len(s.line) {
			k := copy(s.line[s.n:], seg)
			for j := s.n; j < s.n+k; j++ {
				if c := s.line[j]; 'A' <= c && c <= 'Z' && !s.status {
					s.line[j] = c + 'a' - 'A'
				}
			}
			s.n += k
		}
		if i < 0 {
			return
		}
		s.endLine()
		p = p[i+1:]
	}
}

// endLine reads the line just ended.
func (s *Scanner) endLine() {
	switch {
	case s.status:
		// "HTTP/1.1 103 ..."; a 101 is final (the tunnel follows).
		l := s.line[:s.n]
		if len(l) < 12 || string(l[:5]) != "HTTP/" {
			s.state = idle // not an answer's start: a body's bytes
			break
		}
		s.interim = l[9] == '1' && string(l[9:12]) != "101"
		s.status = false
	case s.skip:
	case s.n == 0 || s.n == 1 && s.line[0] == '\r':
		// An empty line ends a section.
		if s.interim {
			s.cl, s.te, s.status = false, false, true
			break
		}
		s.both = s.cl && s.te
		s.state = idle
	case s.n >= len(clName) && string(s.line[:len(clName)]) == string(clName):
		s.cl = true
	case s.n >= len(teName) && string(s.line[:len(teName)]) == string(teName):
		s.te = true
	}
	s.n, s.skip = 0, false
}
