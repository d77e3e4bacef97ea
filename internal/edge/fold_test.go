package edge

import "testing"

// The fold scan finds the first header section with an obs-fold (RFC 9112
// §5.2), by its number, wherever a read cuts the bytes, and never in a
// body's indented lines (Content-Length or chunked) nor in a trailer.
func TestFolds(t *testing.T) {
	body := "{\n  \"a\": 1\n}\n"
	for _, tc := range []struct {
		name  string
		in    string
		first int64
	}{
		{"space fold", "POST / HTTP/1.1\r\nX-A: b\r\n Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello", 1},
		{"tab fold, bare LF", "GET / HTTP/1.1\nX-A: b\n\tc\n\n", 1},
		{"none", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 0},
		{"indented body", "POST / HTTP/1.1\r\nContent-Length: 13\r\n\r\n" + body + "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 0},
		{"fold after an indented body", "POST / HTTP/1.1\r\nContent-Length: 13\r\n\r\n" + body + "GET / HTTP/1.1\r\nX-A: b\r\n c\r\n\r\n", 2},
		{"chunked body and trailer", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\n\r\n  x\r\nA;e=1\r\n  \r\n  \r\n  \r\n0\r\nX-T: 1\r\n\r\nGET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nX-A: b\r\n c\r\n\r\n", 3},
		{"empty lines before a request line", "\r\nGET / HTTP/1.1\r\nX-A: b\r\n c\r\n\r\n", 1},
		{"an unknown coding stops the scan", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\nGET / HTTP/1.1\r\nX-A: b\r\n c\r\n\r\n", 0},
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

// FuzzFolds: wherever a read cuts the bytes, the fold scan reports the
// same section.
func FuzzFolds(f *testing.F) {
	f.Add([]byte("POST / HTTP/1.1\r\nX-A: b\r\n Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello"), 20)
	f.Add([]byte("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n  x\r\n0\r\n\r\nGET / HTTP/1.1\r\nX-A: b\r\n c\r\n\r\n"), 50)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		var whole, split folds
		whole.feed(data)
		cut = max(0, min(cut, len(data)))
		split.feed(data[:cut])
		split.feed(data[cut:])
		if whole.first != split.first || whole.sections != split.sections {
			t.Fatalf("cut at %d: section %d of %d; whole: %d of %d", cut, split.first, split.sections, whole.first, whole.sections)
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
