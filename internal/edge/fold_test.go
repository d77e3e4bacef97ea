package edge

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The fold scan finds the first header section with an obs-fold (RFC 9112
// §5.2), by its number, wherever a read cuts the bytes, and never in a
// body's indented lines (Content-Length or chunked) nor in a trailer. It
// frames every request net/http frames, however long its lines and
// numbers: on the code that kept 128 bytes of a line, 18 digits of a
// length and 15 of a chunk size, each odd request below stopped the scan,
// and the fold after it went unseen (0).
func TestFolds(t *testing.T) {
	body := "{\n  \"a\": 1\n}\n"
	fold := "GET / HTTP/1.1\r\nX-A: b\r\n c\r\n\r\n"
	for _, tc := range []struct {
		name  string
		in    string
		first int64
	}{
		{"space fold", "POST / HTTP/1.1\r\nX-A: b\r\n Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello", 1},
		{"tab fold, bare LF", "GET / HTTP/1.1\nX-A: b\n\tc\n\n", 1},
		{"none", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 0},
		{"indented body", "POST / HTTP/1.1\r\nContent-Length: 13\r\n\r\n" + body + "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 0},
		{"fold after an indented body", "POST / HTTP/1.1\r\nContent-Length: 13\r\n\r\n" + body + fold, 2},
		{"chunked body and trailer", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n\r\n  x\r\nA;e=1\r\n  \r\n  \r\n  \r\n0\r\nX-T: 1\r\n\r\nGET / HTTP/1.1\r\n\r\n" + fold, 3},
		{"empty lines before a request line", "\r\nGET / HTTP/1.1\r\nX-A: b\r\n c\r\n\r\n", 1},
		{"an unknown coding stops the scan", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" + fold, 0},
		{"a length after 130 blanks", "POST / HTTP/1.1\r\nContent-Length:" + strings.Repeat(" ", 130) + "5\r\n\r\nhello" + fold, 2},
		{"a length of 19 digits", "POST / HTTP/1.1\r\nContent-Length: 0000000000000000005\r\n\r\nhello" + fold, 2},
		{"the largest length", "POST / HTTP/1.1\r\nContent-Length: 9223372036854775807\r\n\r\n" + fold, 0},
		{"a length past 63 bits stops the scan", "POST / HTTP/1.1\r\nContent-Length: 9223372036854775808\r\n\r\n" + fold, 0},
		{"two equal lengths", "POST / HTTP/1.1\r\ncontent-length: 5\r\nCONTENT-LENGTH:5 \r\n\r\nhello" + fold, 2},
		{"a name with a blank before its colon is no length", "POST / HTTP/1.1\r\nContent-Length : 5\r\n\r\n" + fold, 2},
		{"a chunk size of 16 hex digits", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000005\r\nhello\r\n0\r\n\r\n" + fold, 2},
		{"a long chunk extension, blanks after a size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;" + strings.Repeat("e", 300) + "\r\nhello\r\n5 \t\r\nhello\r\n0\r\n\r\n" + fold, 2},
		{"a long Transfer-Encoding line", "POST / HTTP/1.1\r\nTransfer-Encoding:" + strings.Repeat("\t", 200) + "CHUNKED  \r\n\r\n5\r\nhello\r\n0\r\n\r\n" + fold, 2},
		{"HTTP/1.0 is framed by its length", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\na\r\n" + fold, 2},
	} {
		for cut := range len(tc.in) + 1 {
			var f folds
			f.feed([]byte(tc.in[:cut]))
			f.feed([]byte(tc.in[cut:]))
			if f.first != tc.first {
				t.Errorf("%s, cut at %d: first folded section %d, want %d", tc.name, cut, f.first, tc.first)
				break
			}
		}
	}
}

// chunks is a source that gives its parts one read at a time at most.
type chunks struct{ parts [][]byte }

func (c *chunks) Read(p []byte) (int, error) {
	for len(c.parts) > 0 && len(c.parts[0]) == 0 {
		c.parts = c.parts[1:]
	}
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	c.parts[0] = c.parts[0][n:]
	return n, nil
}

// through is what net/http reads of in through a dropping fold scan, in
// reads of size bytes at most, the source's cut at cut.
func through(f *folds, in []byte, cut, size int) []byte {
	f.drop = true
	src := &chunks{parts: [][]byte{bytes.Clone(in[:cut]), bytes.Clone(in[cut:])}}
	var out []byte
	p := make([]byte, size)
	for {
		n, err := f.read(src, p)
		out = append(out, p[:n]...)
		if err != nil {
			return out
		}
	}
}

// CR and LF before a request line (empty lines, a stray CR) are
// dropped, up to maxLead of them before one, wherever a read cuts them
// and however small net/http's reads are (its background read takes one
// byte); never in a body, a chunk's data or a request line, nor once the
// scan is lost.
func TestFoldsDropEmptyLines(t *testing.T) {
	get := "GET / HTTP/1.1\r\n\r\n"
	for _, tc := range []struct{ name, in, want string }{
		{"CRLF first", "\r\n" + get, get},
		{"LFs and CRLFs", "\n\r\n\n" + get + "\r\n" + get, get + get},
		{"after a length body that ends in CRLF", "POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n\r\n\r\n" + get, "POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n\r\n" + get},
		{"after a chunked body", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n\r\n\r\n0\r\n\r\n\r\n" + get, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n\r\n\r\n0\r\n\r\n" + get},
		{"a body that begins with CRLF", "POST / HTTP/1.1\r\nContent-Length: 7\r\n\r\n\r\nhello" + get, "POST / HTTP/1.1\r\nContent-Length: 7\r\n\r\n\r\nhello" + get},
		{"a stray CR", "\rGET / HTTP/1.1\r\n\r\n", get},
		{"CR CR LF LF", "\r\r\n\n" + get, get},
		{"not in a request line", "GET /\r\n\r\n", "GET /\r\n\r\n"},
		{"the bound", strings.Repeat("\r\n", maxLead/2) + get, get},
		{"past the bound", strings.Repeat("\r\n", maxLead/2+1) + get, "\r\n" + get},
		{"the bound is per request line", strings.Repeat("\n", maxLead) + get + strings.Repeat("\r", maxLead) + get, get + get},
		{"none once lost", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n\r\n" + get, "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n\r\n" + get},
	} {
		for cut := range len(tc.in) + 1 {
			for _, size := range []int{1, 2, 4096} {
				var f folds
				if got := string(through(&f, []byte(tc.in), cut, size)); got != tc.want {
					t.Fatalf("%s, cut at %d, reads of %d: read %q, want %q", tc.name, cut, size, got, tc.want)
				}
			}
		}
	}
}

// FuzzFolds: wherever a read cuts the bytes and however small the reads,
// the fold scan reports the same section, and drops the same bytes.
func FuzzFolds(f *testing.F) {
	f.Add([]byte("POST / HTTP/1.1\r\nX-A: b\r\n Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello"), 20)
	f.Add([]byte("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n  x\r\n0\r\n\r\nGET / HTTP/1.1\r\nX-A: b\r\n c\r\n\r\n"), 50)
	f.Add([]byte("\r\n\nGET / HTTP/1.1\r\n\r\n\r\n\rGET / HTTP/1.1\r\n\r\n"), 1)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		var whole, split, small folds
		whole.feed(bytes.Clone(data))
		cut = max(0, min(cut, len(data)))
		split.feed(bytes.Clone(data[:cut]))
		split.feed(bytes.Clone(data[cut:]))
		if whole.first != split.first || whole.sections != split.sections {
			t.Fatalf("cut at %d: section %d of %d; whole: %d of %d", cut, split.first, split.sections, whole.first, whole.sections)
		}
		var dropped folds
		a, b := through(&dropped, data, len(data), 4096), through(&small, data, cut, 1)
		if !bytes.Equal(a, b) || dropped.first != small.first || dropped.sections != small.sections {
			t.Fatalf("cut at %d, one-byte reads: read %q, section %d of %d; whole: %q, %d of %d", cut, b, small.first, small.sections, a, dropped.first, dropped.sections)
		}
	})
}

// netHTTPRequests reads data as net/http's server reads a connection:
// where each request it reads whole (header and body) ends, and how many
// CR and LF it skipped before it (after a POST), up to the first it
// refuses or after which it closes.
func netHTTPRequests(data []byte) (ends, skipped []int) {
	rd := bytes.NewReader(data)
	br := bufio.NewReader(rd) // net/http's server reads through 4 KiB too
	method := ""
	for {
		skip := 0
		if method == "POST" { // net/http's conn.readRequest
			peek, _ := br.Peek(4)
			for skip < len(peek) && (peek[skip] == '\r' || peek[skip] == '\n') {
				skip++
			}
			br.Discard(skip)
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			return ends, skipped
		}
		if req.Body != nil {
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return ends, skipped
			}
		}
		ends, skipped = append(ends, len(data)-rd.Len()-br.Buffered()), append(skipped, skip)
		if req.Close {
			return ends, skipped
		}
		method = req.Method
	}
}

// FuzzFoldsFraming: the scan frames what net/http frames. After each
// request net/http reads whole from data, up to a folded one, the scan
// has begun as many header sections and is expecting a request line, and
// it dropped of the request's bytes just the CR and LF net/http skipped
// before it (net/http reads no request after others that starts with
// them: a drop elsewhere was in a body the scan framed otherwise).
func FuzzFoldsFraming(f *testing.F) {
	for _, s := range []string{
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length:" + strings.Repeat(" ", 130) + "5\r\n\r\nhelloGET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000002;x=\"y\"\r\n\r\n\r\n0\r\nX-T: 1\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\na\r\nGET / HTTP/1.1\r\n\r\n",
		"POST / HTTP/1.1\r\nContent-Length: 0000000000000000001\r\n\r\n\n\r\r\nGET / HTTP/1.1\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ends, skipped := netHTTPRequests(data)
		var s folds
		s.drop = true
		from := 0
		for k, end := range ends {
			p := bytes.Clone(data[from:end])
			n := s.feed(p)
			if s.first != 0 {
				// A folded request is refused and its connection
				// closed: how net/http joined its lines is its alone.
				return
			}
			if want := data[from+skipped[k] : end]; !bytes.Equal(p[:n], want) {
				t.Fatalf("%q: request %d: the scan left %q of it, net/http read %q", data[:end], k+1, p[:n], want)
			}
			if s.st != fsStart || s.n != 0 || s.sections != int64(k+1) {
				t.Fatalf("%q: net/http read %d requests; the scan began %d sections, state %d (%d bytes into a line)", data[:end], k+1, s.sections, s.st, s.n)
			}
			from = end
		}
	})
}

// midRequest: the bytes read so far end inside a request (its client may
// still be sending: a close lingers, linger.go) everywhere but at the
// start of a request line, wherever a read cuts them.
func TestMidRequest(t *testing.T) {
	const chunked = "PATCH /r/3 HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\na\r\n{\"bump\":1}\r\n0\r\nX-Sum: 1\r\n\r\n"
	const sized = "PATCH /r/3 HTTP/1.1\r\nContent-Length: 10\r\n\r\n{\"bump\":1}"
	const get = "GET /r/3 HTTP/1.1\r\nHost: a\r\n\r\n"
	for _, whole := range []string{chunked, sized, get, get + chunked, sized + get} {
		for cut := range len(whole) + 1 {
			var f folds
			f.feed([]byte(whole[:cut]))
			atEnd := cut == 0 || cut == len(whole) || cut == len(get) && whole[:cut] == get || cut == len(sized) && whole[:cut] == sized
			if f.midRequest() == atEnd {
				t.Errorf("%q cut at %d: midRequest %v, want %v", whole, cut, f.midRequest(), !atEnd)
			}
		}
	}
	var f folds
	f.feed([]byte("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"))
	if !f.midRequest() {
		t.Errorf("framing lost (an unknown coding): midRequest false, want true")
	}
}
