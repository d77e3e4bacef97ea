package edge

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// A client that half-closes while its handler waits ends the request
// (its context) and is sent nothing: net/http alone answered it 200 with
// an empty body. An answer written before the client's end of stream was
// read is sent whole, the half-close after it notwithstanding.
func TestGoneClientSentNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	srv := Wire(&http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/now" {
			io.WriteString(w, "answer")
			return
		}
		select {
		case <-r.Context().Done():
			ended <- r.Context().Err()
		case <-time.After(10 * time.Second): // only a failure gets here
			ended <- nil
			io.WriteString(w, "late answer")
		}
	})})
	go srv.Serve(Listener(ln, time.Minute, nil))
	t.Cleanup(func() { srv.Close() })

	for _, tc := range []struct{ path, want string }{
		{"/wait", ""},
		{"/now", "HTTP/1.1 200 OK"},
	} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET "+tc.path+" HTTP/1.1\r\nHost: x\r\n\r\n")
		if tc.path == "/now" {
			// The answer is there before the half-close.
			if _, err := c.Read(make([]byte, 1)); err != nil {
				t.Fatal(err)
			}
		}
		c.(*net.TCPConn).CloseWrite()
		if tc.path == "/wait" {
			if err := <-ended; err == nil {
				t.Fatal("the waiting request's context did not end")
			}
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(c)
		if err != nil || tc.want == "" && len(b) != 0 {
			t.Errorf("%s: read %q, %v; want nothing, the connection closed", tc.path, b, err)
		}
		if tc.want != "" && len(b) == 0 {
			t.Errorf("%s: the answer's rest is lost", tc.path)
		}
	}
}

// A body that stops coming past ReadTimeout ends the request's context
// too (net/http cancels it at any failed read), but the client is there:
// the handler's answer to the failed read is sent, as without Wire's
// abort.
func TestTimedOutClientStillAnswered(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := Wire(&http.Server{
		ReadTimeout: 100 * time.Millisecond,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.ReadAll(r.Body); err != nil {
				<-r.Context().Done() // ended by the failed read
				http.Error(w, "body timed out", http.StatusRequestTimeout)
			}
		}),
	})
	go srv.Serve(Listener(ln, time.Minute, nil))
	t.Cleanup(func() { srv.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("answer %v, %v; want the handler's 408", resp, err)
	}
}
