package edge

import (
	"bytes"
	"io"
)

// Obsolete line folding (obs-fold), and empty lines before a request.
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
// messages' framing (RFC 9112 §6.3) exactly as net/http reads it: the
// request line (HTTP/1.0 ignores Transfer-Encoding), the field lines up
// to the empty line, then a body of Content-Length bytes (after OWS,
// digits up to 2^63-1, leading zeros any) or chunked (one
// Transfer-Encoding line, "chunked" between OWS; chunk sizes of up to
// 16 hex digits, extensions, the data and its CRLF, a trailer section).
// It parses as the bytes come, keeping no line, so no length of line or
// number that net/http accepts makes it give up. It numbers the header
// sections it reads; the handler numbers the requests it is given
// (Wire), and the two agree, since net/http reads the requests of a
// connection in order and hands each to the handler (Wire turns its
// general OPTIONS * handler off).
//
// What it cannot follow is what net/http refuses: an unknown transfer
// coding (501), a bad length or chunk line (400, or a body read error);
// net/http closes the connection after each. The scan then stops (lost),
// and the connection notes the first request whose header section it did
// not read: Guard answers that one 400 and closes, as a fold, so a
// request the scan did not see never goes through whatever the cause,
// and answers the request at which it stopped with Connection: close,
// so a client is not refused for nothing. A connection that leaves HTTP
// (hijacked, an upgrade) is no longer scanned at all (Conn.Read).
//
// RFC 9112 §2.2: a server expecting a request line SHOULD ignore at
// least one empty line (CRLF) before it, as NGINX and Varnish do;
// net/http answers 400 to it, but after a POST, where it skips up to
// four CR or LF bytes (a CRLF that old browsers sent after the body).
// Where the framing says a request line comes next, and only there
// (never in a body), the scan drops the CR and LF bytes from what
// net/http reads, as NGINX skips them, up to maxLead before one request
// line; past that net/http reads them, and refuses the request. So
// net/http never meets them, and never skips bytes the scan took for a
// line of a request (after a POST, "\r\r\n\n" and a folded request were
// a section of their own to the scan, nothing to net/http, and the
// numbering slipped by one). The read and header timeouts go on bounding
// a client that sends them slowly: the drop reads on under net/http's
// deadline.

// Framing states of folds.
const (
	fsStart   = iota // expecting a request line (CR and LF before it dropped, or empty lines skipped)
	fsField          // in a header section's field lines
	fsBody           // in a Content-Length body: left bytes to go
	fsSize           // in a chunk-size line
	fsData           // in a chunk's data: left bytes to go
	fsDataCR         // expecting the CR after a chunk's data
	fsDataLF         // expecting its LF
	fsTrailer        // in a trailer section
	fsLost           // cannot follow the framing: nothing more is found or dropped
)

// What of a field line matters (folds.fl).
const (
	flSkip = iota // nothing more of it
	flName        // a framing field's name and colon, name[:nm] matched so far
	flCL          // a Content-Length value (vs: vs* states)
	flTE          // a Transfer-Encoding value (vs: letters of "chunked" matched)
)

// Content-Length value states: OWS* DIGIT+ OWS*, as net/http's
// parseContentLength reads it once textproto trimmed the blanks.
const (
	vsLead = iota
	vsDigits
	vsTrail
	vsBad
)

// Transfer-Encoding value states beyond the letters of "chunked" matched
// (0-7): OWS after them, and anything else.
const (
	teTrail = 8
	teBad   = 9
)

// Chunk-size line states: 1-16 hex digits, then OWS or ';' and an
// extension, as net/http's chunked reader reads it (RFC 9112 §7.1).
const (
	csDigits = iota
	csTrail
	csExt
	csBad
)

const (
	// maxCL is the largest Content-Length net/http takes
	// (strconv.ParseUint, 63 bits).
	maxCL = 1<<63 - 1
	// maxLead is how many CR and LF are dropped before one request
	// line (16 CRLFs): a client's stray CRLF or two, not a stream.
	maxLead = 32
	// The framing fields' names, lower case, with their colon: a name
	// with a blank before the colon is not canonical, and net/http does
	// not read it as the field.
	clField = "content-length:"
	teField = "transfer-encoding:"
)

// folds follows a connection's request framing, finds the first header
// section with an obs-fold, and drops empty lines before request lines
// (drop). Fed on the connection's reads, one at a time.
type folds struct {
	st       int
	left     uint64 // fsBody, fsData: bytes to skip
	sections int64  // header sections begun
	first    int64  // the first section with a fold (1-based); 0: none
	// drop: CR and LF before a request line are removed from what
	// net/http reads (Wire sets it); lead counts those dropped before
	// the one awaited.
	drop bool
	lead int

	// The current line.
	n    int  // bytes of it seen
	cr   bool // its last byte so far is CR
	fl   int
	name string
	nm   int
	vs   int
	vcr  bool   // a CR was the value's or chunk line's last byte so far
	v    uint64 // the number parsed so far
	nd   int    // hex digits of a chunk size
	tail [16]byte

	// The current header section.
	fold      bool
	http10    bool // HTTP/1.0 (or 0.x): Transfer-Encoding is ignored
	clSeen    bool
	clBad     bool
	cl        uint64
	te        int // Transfer-Encoding field lines
	teChunked bool
}

// read reads from src into p what net/http is to read: src's bytes,
// scanned, less the CR and LF dropped before request lines. A read that
// gave nothing but those reads on, under the deadline the connection
// has (net/http's read or idle timeout).
func (f *folds) read(src io.Reader, p []byte) (int, error) {
	for {
		n, err := src.Read(p)
		if n > 0 {
			n = f.feed(p[:n])
		}
		if n > 0 || err != nil || len(p) == 0 {
			return n, err
		}
	}
}

// feed scans p and drops from it the empty lines before a request line
// (when f.drop): it returns how many bytes are left, moved to the front
// of p.
func (f *folds) feed(p []byte) int {
	out, from := 0, 0 // p[:out] kept; p[from:] not moved yet
	i := 0
	for i < len(p) && f.st != fsLost {
		switch f.st {
		case fsBody, fsData:
			k := f.left
			if r := uint64(len(p) - i); k > r {
				k = r
			}
			i += int(k)
			if f.left -= k; f.left == 0 {
				if f.st == fsBody {
					f.st = fsStart
				} else {
					f.st = fsDataCR
				}
			}
			continue
		case fsDataCR, fsDataLF:
			// net/http reads the two bytes after a chunk's data and
			// wants CRLF exactly ("malformed chunked encoding").
			switch {
			case f.st == fsDataCR && p[i] == '\r':
				f.st = fsDataLF
			case f.st == fsDataLF && p[i] == '\n':
				f.sizeLine()
			default:
				f.st = fsLost
				continue
			}
			i++
			continue
		case fsStart:
			if !f.drop || f.n != 0 || p[i] != '\r' && p[i] != '\n' {
				break
			}
			if f.lead == maxLead {
				// Past the bound: net/http reads them, and refuses
				// the request (or, after a POST, skips four more).
				f.st = fsLost
				continue
			}
			k := i
			for k < len(p) && (p[k] == '\r' || p[k] == '\n') && f.lead < maxLead {
				k++
				f.lead++
			}
			if out != from {
				copy(p[out:], p[from:i])
			}
			out += i - from
			i, from = k, k
			continue
		}
		j := bytes.IndexByte(p[i:], '\n')
		end := len(p)
		if j >= 0 {
			end = i + j
		}
		if seg := p[i:end]; len(seg) > 0 {
			switch f.st {
			case fsStart:
				f.push(seg)
			case fsField:
				f.field(seg)
			case fsSize:
				f.size(seg)
			}
			f.n += len(seg)
			f.cr = seg[len(seg)-1] == '\r'
		}
		if j < 0 {
			break
		}
		i = end + 1
		f.endLine()
		f.n, f.cr = 0, false
	}
	if from == 0 {
		return len(p) // nothing dropped
	}
	if out != from {
		copy(p[out:], p[from:])
	}
	return out + len(p) - from
}

// push keeps the last bytes of the request line, for its version.
func (f *folds) push(seg []byte) {
	if len(seg) >= len(f.tail) {
		copy(f.tail[:], seg[len(seg)-len(f.tail):])
		return
	}
	copy(f.tail[:], f.tail[len(seg):])
	copy(f.tail[len(f.tail)-len(seg):], seg)
}

// midRequest reports whether the bytes fed so far end inside a request
// (its request line, header section or body), or where the framing is
// lost: its client may still be sending. At the start of a request line
// with none of it read, it has sent every request it began.
func (f *folds) midRequest() bool { return f.st != fsStart || f.n != 0 }

// endLine takes the line just ended (f.n bytes, a final CR included).
func (f *folds) endLine() {
	empty := f.n == 0 || f.n == 1 && f.cr
	switch f.st {
	case fsStart:
		if !empty { // empty here only when not dropped: skipped
			f.request()
		}
	case fsField:
		switch {
		case empty:
			f.endSection()
		case f.fl == flCL:
			f.endCL()
		case f.fl == flTE:
			f.teChunked = f.vs == len("chunked") || f.vs == teTrail
		}
	case fsSize:
		ok := f.vs != csBad && f.nd > 0 && f.vcr // CRLF: net/http refuses a bare LF here
		switch {
		case !ok:
			f.st = fsLost
		case f.v == 0:
			f.st = fsTrailer
		default:
			f.st, f.left = fsData, f.v
		}
	case fsTrailer:
		if empty {
			f.st = fsStart
		}
	}
}

// request begins a header section at the end of its request line. The
// version is what follows the line's second space, eight bytes when
// net/http takes it ("HTTP/d.d"), so the line's last nine: one before
// HTTP/1.1 has its Transfer-Encoding ignored.
func (f *folds) request() {
	f.sections++
	t, n := len(f.tail), f.n
	if f.cr {
		t, n = t-1, n-1
	}
	v := f.tail[t-9 : t] // " HTTP/d.d" when net/http takes the line
	f.http10 = n >= 9 && string(v[:6]) == " HTTP/" && v[7] == '.' && (v[6] == '0' || v[6] == '1' && v[8] == '0')
	f.st, f.lead = fsField, 0
	f.fold, f.clSeen, f.clBad, f.cl, f.te, f.teChunked = false, false, false, 0, 0, false
}

// field scans a segment of a field line, from its start when f.n is 0.
func (f *folds) field(seg []byte) {
	if f.n == 0 {
		f.fl = flSkip
		switch seg[0] {
		case ' ', '\t':
			f.fold = true
			return
		case 'c', 'C':
			f.fl, f.name, f.nm = flName, clField, 0
		case 't', 'T':
			f.fl, f.name, f.nm = flName, teField, 0
		default:
			return
		}
	}
	for f.fl == flName && len(seg) > 0 {
		c := seg[0]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != f.name[f.nm] {
			f.fl = flSkip
			return
		}
		seg = seg[1:]
		if f.nm++; f.nm == len(f.name) {
			f.vs, f.v, f.vcr = 0, 0, false
			f.fl = flCL
			if f.name == teField {
				f.fl = flTE
				f.te++
			}
		}
	}
	switch f.fl {
	case flCL:
		f.clValue(seg)
	case flTE:
		f.teValue(seg)
	}
}

// clValue parses a segment of a Content-Length value.
func (f *folds) clValue(seg []byte) {
	for _, c := range seg {
		switch {
		case f.vcr:
			f.vs = vsBad // a CR inside a value: net/http refuses the line
		case c == '\r':
			f.vcr = true
		case '0' <= c && c <= '9' && f.vs <= vsDigits:
			d := uint64(c - '0')
			if f.v > (maxCL-d)/10 {
				f.vs = vsBad
			} else {
				f.v, f.vs = f.v*10+d, vsDigits
			}
		case c == ' ' || c == '\t':
			if f.vs == vsDigits {
				f.vs = vsTrail
			}
		default:
			f.vs = vsBad
		}
		if f.vs == vsBad {
			f.clBad, f.fl = true, flSkip
			return
		}
	}
}

// endCL takes a Content-Length line's value: net/http refuses an empty
// one, or two that differ.
func (f *folds) endCL() {
	if f.vs != vsDigits && f.vs != vsTrail || f.clSeen && f.cl != f.v {
		f.clBad = true
	}
	f.cl, f.clSeen = f.v, true
}

// teValue matches a segment of a Transfer-Encoding value against
// "chunked" (ASCII, any case) between blanks.
func (f *folds) teValue(seg []byte) {
	for _, c := range seg {
		switch {
		case f.vcr:
			f.vs = teBad
		case c == '\r':
			f.vcr = true
		case c == ' ' || c == '\t':
			switch f.vs {
			case 0, teTrail:
			case len("chunked"):
				f.vs = teTrail
			default:
				f.vs = teBad
			}
		case f.vs < len("chunked") && c|0x20 == "chunked"[f.vs]:
			f.vs++
		default:
			f.vs = teBad
		}
		if f.vs == teBad {
			f.fl = flSkip
			return
		}
	}
}

// endSection ends a header section: the fold is noted, and the body
// framed as net/http frames it (chunked before a length; no
// Transfer-Encoding on HTTP/1.0).
func (f *folds) endSection() {
	if f.fold && f.first == 0 {
		f.first = f.sections
	}
	te := f.te > 0 && !f.http10
	switch {
	case te && (f.te > 1 || !f.teChunked), f.clBad:
		f.st = fsLost // net/http answers 501 or 400, and closes
	case te:
		f.sizeLine()
	case f.cl > 0:
		f.st, f.left = fsBody, f.cl
	default:
		f.st = fsStart
	}
}

// sizeLine expects a chunk-size line.
func (f *folds) sizeLine() {
	f.st, f.vs, f.v, f.nd, f.vcr = fsSize, csDigits, 0, 0, false
}

// size parses a segment of a chunk-size line.
func (f *folds) size(seg []byte) {
	for _, c := range seg {
		if f.vs == csBad {
			return
		}
		if f.vcr {
			f.vs = csBad // "invalid CR in chunked line"
			return
		}
		if c == '\r' {
			f.vcr = true
			continue
		}
		switch f.vs {
		case csDigits:
			if d, ok := unhex(c); ok {
				if f.nd == 16 {
					f.vs = csBad // "http chunk length too large"
					return
				}
				f.v, f.nd = f.v<<4|uint64(d), f.nd+1
				continue
			}
			switch {
			case f.nd == 0:
				f.vs = csBad
			case c == ';':
				f.vs = csExt
			case c == ' ' || c == '\t':
				f.vs = csTrail
			default:
				f.vs = csBad
			}
		case csTrail:
			// Trailing blanks only: net/http trims them, then cuts
			// at ';' and parses what is before it, so "5 ;x" is bad.
			if c != ' ' && c != '\t' {
				f.vs = csBad
			}
		}
	}
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
