package upframe

import "testing"

// The scan finds Content-Length beside Transfer-Encoding in an answer's
// final header section only: not in a 1xx's, not in the body (whose lines
// may look like fields), and not in bytes that start no answer; whatever
// the reads' boundaries.
func TestScanner(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want bool
	}{
		{"both", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nHELLO\r\n0\r\n\r\n", true},
		{"both, either case and order", "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nCONTENT-LENGTH: 5\r\n\r\n", true},
		{"after a 103", "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", true},
		{"chunked alone", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false},
		{"length alone", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHELLO", false},
		{"split over a 1xx and the final", "HTTP/1.1 103 Early Hints\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false},
		{"fields in the body", "HTTP/1.1 200 OK\r\nContent-Length: 60\r\n\r\nx\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", false},
		{"not an answer's start", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", false},
		{"a 101's tunnel", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", false},
		{"a field named like one", "HTTP/1.1 200 OK\r\nContent-Length-X: 5\r\nTransfer-Encoding: chunked\r\n\r\n", false},
	} {
		for cut := range len(tc.in) + 1 {
			var s Scanner
			s.Arm()
			s.Feed([]byte(tc.in[:cut]))
			s.Feed([]byte(tc.in[cut:]))
			if got := s.Ambiguous(); got != tc.want {
				t.Errorf("%s, cut at %d: ambiguous %v, want %v", tc.name, cut, got, tc.want)
				break
			}
		}
	}
}

// Arm starts a new answer only between answers: a write while a header is
// read (a request body after 100 Continue) does not reset the scan, and
// the next request's answer is judged on its own.
func TestScannerArm(t *testing.T) {
	var s Scanner
	s.Arm()
	s.Feed([]byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n"))
	s.Arm()
	s.Feed([]byte("Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"))
	if !s.Ambiguous() {
		t.Fatal("a write mid-header reset the scan")
	}
	s.Arm()
	s.Feed([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	if s.Ambiguous() {
		t.Fatal("the next answer kept the last one's verdict")
	}
}
