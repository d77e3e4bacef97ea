package proxy_test

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// A stream reaches the client as it comes, on every path that relays an
// upstream body as it reads it — the lean loop, ReverseProxy, and the
// cached fill that finds the answer too large to keep and streams it to
// the client that asked (internal/largebody): an answer of unknown length or an
// event stream is flushed after every read, as httputil.ReverseProxy
// does. (Batch and split answers are read whole before they are written:
// not streams.)
//
// The upstream sends a first part larger than max_body_bytes — so the
// cached path keeps max_body_bytes+1 of it as its prefix and streams the
// rest — then waits until the client has read the whole first part before
// it sends the end. An answer held in net/http's write buffer never
// reaches the client, and the upstream never ends: on the old code the
// cached path's streamLarge did not flush, and an event stream or a
// long-poll answer over the bound stalled there.
func TestStreamsFlushEveryPath(t *testing.T) {
	first := strings.Repeat("f", 1<<20+1) + "beyond-the-prefix" // MaxBodyBytes is 1 MiB in newEnv
	const last = "the-end"
	identity := func(s string) string { return s }
	rows := []struct {
		name  string
		head  string
		frame func(string) string
		end   string
	}{
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", chunk, "0\r\n\r\n"},
		{"until close", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", identity, ""},
		{"event stream with Content-Length", fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n", len(first)+len(last)), identity, ""},
	}
	for _, p := range edgePaths {
		for _, row := range rows {
			t.Run(p.name+"/"+row.name, func(t *testing.T) {
				release := make(chan struct{})
				released := false
				free := func() {
					if !released {
						released = true
						close(release)
					}
				}
				defer free()
				up := newRawUp(t, func(c net.Conn) {
					io.WriteString(c, row.head+row.frame(first))
					held(t, release)
					io.WriteString(c, row.frame(last)+row.end)
					c.Close() // ends the answer that runs until close; the others are whole
				})
				e := newEnvURL(t, nil, up.url, []testRoute{clientRoute}, p.opts...)
				resp, err := client.Get(e.front.URL + p.target)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				got := make(chan string, 1)
				go func() {
					b := make([]byte, len(first))
					n, _ := io.ReadFull(resp.Body, b)
					got <- string(b[:n])
				}()
				select {
				case b := <-got:
					if b != first {
						t.Errorf("the client read %d bytes, not the first part", len(b))
					}
				case <-time.After(10 * time.Second): // a hang guard, not a measurement
					t.Errorf("the client has not received the first part while the upstream waits: held in a buffer")
					free()
					<-got
				}
				free()
				rest, err := io.ReadAll(resp.Body)
				if err != nil || string(rest) != last {
					t.Errorf("then %q, %v; want %q", rest, err, last)
				}
			})
		}
	}
}
