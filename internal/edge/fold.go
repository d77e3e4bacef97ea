package edge

import "bytes"

// Obsolete line folding (obs-fold).
//
// A field line that starts with a space or a tab continues the one before
// it (RFC 9112 §5.2, obs-fold). net/http folds it into that field's value,
// so "X-A: b\r\n Transfer-Encoding: chunked" beside a Content-Length is
// framed by the length; a front proxy that reads the folded line as a
// field of its own frames the same bytes as chunked, and the two then
// disagree on where the next request starts (request smuggling). RFC 9112
// §5.2 lets a server reject such a request with 400 or replace each fold
// with a space; NGINX answers 400 to a header line that starts with
// whitespace, and so does the sidecar, closing the connection (Guard,
// counted as ReasonFraming): after the 400 it cannot know where the next
// request would start either.
//
// The handler never sees the fold (net/http joined the lines), so the
// connection finds it (folds, fed by Conn.Read). Unlike the framing scan,
// which may look at every line start, this one must not take a body's
// indented line (pretty-printed JSON) for a fold, so it follows the
// messages' framing (RFC 9112 §6.3): the request line, the field lines up
// to the empty line, then a body of Content-Length bytes or chunked
// (chunk sizes, data, trailer section). It numbers the header sections it
// reads; the handler numbers the requests it is given (Wire), and the two
// agree, since net/http reads the requests of a connection in order. A
// section it cannot follow (an unknown transfer coding, an unparsable
// length, a line past foldLine bytes where it needs the content) stops
// the scan for the connection: net/http refuses such a request and
// closes, or the connection has left HTTP (an upgrade).

// Framing states of folds.
const (
	fsStart   = iota // expecting a request line (empty lines before it are skipped)
	fsField          // in a header section's field lines
	fsBody           // in a Content-Length body: left bytes to go
	fsSize           // expecting a chunk-size line
	fsData           // in a chunk's data: left bytes to go
	fsDataEnd        // expecting the CRLF after a chunk's data
	fsTrailer        // in a trailer section
	fsLost           // cannot follow the framing: nothing more is found
)

// foldLine is how much of a line folds keeps: enough for a field name and
// a Content-Length, Transfer-Encoding or chunk size value.
const foldLine = 128

// folds follows a connection's request framing and finds the first header
// section with an obs-fold. Fed on the connection's reads, one at a time.
type folds struct {
	st       int
	left     int64 // fsBody, fsData: bytes to skip
	sections int64 // header sections begun
	first    int64 // the first section with a fold (1-based); 0: none
	line     [foldLine]byte
	n        int  // bytes of the current line seen (line holds up to foldLine of those kept)
	b0       byte // the current line's first byte
	keep     bool // the current line's bytes are kept (feed)
	cr       bool // the current line's last byte so far is CR
	fold     bool // the current section has a fold
	cl       int64
	chunked  bool
	te       bool // a Transfer-Encoding field in the section
}

// feed scans p.
func (f *folds) feed(p []byte) {
	for len(p) > 0 && f.st != fsLost {
		if f.st == fsBody || f.st == fsData {
			k := int64(len(p))
			if k > f.left {
				k = f.left
			}
			f.left -= k
			p = p[k:]
			if f.left == 0 {
				if f.st == fsBody {
					f.st = fsStart
				} else {
					f.st = fsDataEnd
				}
			}
			continue
		}
		i := bytes.IndexByte(p, '\n')
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		if f.n == 0 && len(seg) > 0 {
			// Only a field line that may be Content-Length or
			// Transfer-Encoding, and a chunk size, are kept: the
			// others need their first byte and length alone.
			f.b0 = seg[0]
			f.keep = f.st == fsSize || f.st == fsField && (f.b0|0x20 == 'c' || f.b0|0x20 == 't')
		}
		if f.keep && f.n < foldLine {
			copy(f.line[f.n:], seg)
		}
		f.n += len(seg)
		if len(seg) > 0 {
			f.cr = seg[len(seg)-1] == '\r'
		}
		if i < 0 {
			return
		}
		p = p[i+1:]
		n := f.n
		f.n = 0
		if f.cr {
			n--
		}
		f.endLine(n)
		f.keep, f.cr = false, false
	}
}

// midRequest reports whether the bytes fed so far end inside a request
// (its request line, header section or body), or where the framing is
// lost: its client may still be sending. At the start of a request line
// with none of it read, it has sent every request it began.
func (f *folds) midRequest() bool { return f.st != fsStart || f.n != 0 }

// endLine takes the line of n bytes just ended (its CR dropped; f.line
// holds up to foldLine of them).
func (f *folds) endLine(n int) {
	line := f.line[:min(n, foldLine)] // meaningful when kept
	switch f.st {
	case fsStart:
		if n > 0 {
			f.sections++
			f.st, f.fold, f.cl, f.chunked, f.te = fsField, false, -1, false, false
		}
	case fsField:
		switch {
		case n == 0:
			f.endSection()
		case f.b0 == ' ' || f.b0 == '\t':
			f.fold = true
		case f.keep:
			f.field(line, n)
		}
	case fsSize:
		size, ok := chunkSize(line, n)
		switch {
		case !ok:
			f.st = fsLost
		case size == 0:
			f.st = fsTrailer
		default:
			f.st, f.left = fsData, size
		}
	case fsDataEnd:
		f.st = fsSize
		if n != 0 {
			f.st = fsLost
		}
	case fsTrailer:
		if n == 0 {
			f.st = fsStart
		}
	}
}

// endSection ends a header section: the fold is noted, and the body
// framed as net/http frames it (chunked before a length).
func (f *folds) endSection() {
	if f.fold && f.first == 0 {
		f.first = f.sections
	}
	switch {
	case f.te && f.chunked:
		f.st = fsSize
	case f.te:
		f.st = fsLost
	case f.cl > 0:
		f.st, f.left = fsBody, f.cl
	default:
		f.st = fsStart
	}
}

// field notes a Content-Length or Transfer-Encoding field line.
func (f *folds) field(line []byte, n int) {
	name, value, ok := bytes.Cut(line, []byte{':'})
	if !ok {
		return // net/http refuses the request
	}
	switch {
	case bytes.EqualFold(name, []byte("Content-Length")):
		v, ok := decimal(bytes.TrimSpace(value))
		if !ok || n > foldLine || f.cl >= 0 && f.cl != v {
			f.st = fsLost
			return
		}
		f.cl = v
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		if n > foldLine {
			f.st = fsLost
			return
		}
		f.te = true
		v := bytes.TrimSpace(value)
		f.chunked = len(v) >= len("chunked") && bytes.EqualFold(v[len(v)-len("chunked"):], []byte("chunked"))
	}
}

// decimal parses a Content-Length value; ok false for none, a sign, a
// list or a value past 18 digits.
func decimal(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// chunkSize parses a chunk-size line (RFC 9112 §7.1), extensions after
// ';' ignored; ok false for a line net/http would refuse as well.
func chunkSize(line []byte, n int) (int64, bool) {
	var v int64
	digits := 0
	for _, c := range line {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return v, digits > 0 && digits <= 15 && (c == ';' || c == ' ' || c == '\t')
		}
		v = v<<4 | int64(d)
		digits++
	}
	return v, digits > 0 && digits <= 15 && n <= foldLine
}
