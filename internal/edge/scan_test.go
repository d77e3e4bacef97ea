package edge

import (
	"bufio"
	"bytes"
	"net/textproto"
	"testing"
)

// feedSplit feeds data to a new scanner in two reads cut at cut, as a
// connection may deliver it.
func feedSplit(data []byte, cut int) (both, te bool) {
	var s scanner
	cut = max(0, min(cut, len(data)))
	b1, t1 := s.feed(data[:cut])
	b2, t2 := s.feed(data[cut:])
	return b1 || b2, t1 || t2
}

// The scan finds Content-Length beside Transfer-Encoding in one header
// section (RFC 9112 §6.1), in any letter case and wherever a read cuts
// the bytes, and not across two sections.
func TestScanner(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       string
		both, te bool
	}{
		{"both", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", true, true},
		{"both, other case and order", "POST / HTTP/1.1\r\ntransfer-ENCODING: chunked\r\nCONTENT-length: 5\r\n\r\n", true, true},
		{"bare LF", "POST / HTTP/1.1\nContent-Length: 5\nTransfer-Encoding: chunked\n\n", true, true},
		{"chunked alone", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false, true},
		{"length alone", "POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nok", false, false},
		{"two sections, one each", "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\nPOST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false, true},
		{"section not ended yet", "POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n", false, false},
	} {
		for cut := range len(tc.in) + 1 {
			if both, te := feedSplit([]byte(tc.in), cut); both != tc.both || te != tc.te {
				t.Errorf("%s, cut at %d: both %v te %v, want %v %v", tc.name, cut, both, te, tc.both, tc.te)
				break
			}
		}
	}
}

// FuzzScanner: wherever a read cuts the bytes, the scan reports the same;
// and a header section net/textproto reads with both fields is always
// found (the scan may see more than a parser, never less).
func FuzzScanner(f *testing.F) {
	f.Add([]byte("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"), 20)
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), 3)
	f.Add([]byte("POST / HTTP/1.1\r\n Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"), 0)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		whole, wte := feedSplit(data, len(data))
		both, te := feedSplit(data, cut)
		if both != whole || te != wte {
			t.Fatalf("cut at %d: %v %v; whole: %v %v", cut, both, te, whole, wte)
		}
		tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(data)))
		if _, err := tp.ReadLine(); err != nil {
			return
		}
		h, err := tp.ReadMIMEHeader()
		if err != nil {
			return
		}
		_, cl := h["Content-Length"]
		_, hte := h["Transfer-Encoding"]
		if cl && hte && !both {
			t.Fatalf("a section with both fields not found: %q", data)
		}
		if hte && !te {
			t.Fatalf("a section with Transfer-Encoding not found: %q", data)
		}
	})
}
