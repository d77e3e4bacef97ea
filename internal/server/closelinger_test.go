package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestAnswerBeforeTheBodyLingers: a write sent chunked behind Expect:
// 100-continue to an upstream that sends a 100 of its own and then
// answers without reading the body (an app that acts on the header
// alone, full duplex: net/http does not first drain the body it left
// unread, which the client here holds back). The sidecar forwards no
// Expect and starts the body at once, which sends the client net/http's
// 100 Continue: the client now owes its body, and may send it while it
// reads the answer. The sidecar relays the
// answer (Connection: close: the body was not read to its end) and
// closes. Before, it closed at once: net/http's end of request aborts the
// body read ReverseProxy's Transport still had pending, which leaves the
// chunked reader failed, so nothing of the rest was drained, and a client
// still sending met a reset (RFC 1122 §4.2.2.13): its write failed, its
// Go Transport closed the connection under the answer it was reading
// ("use of closed network connection", the invariant harness's garbled
// chunked write, 1 run in 3). Now the connection half-closes and drains
// what the client still sends, as after the sidecar's refusals (RFC 9112
// §9.6).
//
// The ordering is the one that lost the answer, made certain: the client
// reads the 100 and the whole answer before it sends its body, and only
// then looks for the end of the stream. Its body is far over what the
// sockets' buffers hold, so it is taken whole only if something reads it:
// net/http's own drain (256 KiB at most) and then the lingering close.
// (Waiting for the end of the stream before sending, as a first version
// of this test did, deadlocks whenever net/http drains before it closes,
// which it does when the Transport's body read was not pending as the
// handler ended: the drain waits on a body the client holds back.)
func TestAnswerBeforeTheBodyLingers(t *testing.T) {
	release := make(chan chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			t.Error(err)
		}
		w.WriteHeader(http.StatusContinue)
		<-<-release // the client has the sidecar's 100
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `{"applied":true}`)
	}))
	defer up.Close()
	rep := startReplicaYAML(t, fmt.Sprintf(edgeConfig, "  read_header_timeout: 10s", up.URL, "")+
		"  - name: client-write\n    methods: [PATCH]\n    path: /clients/{id:[1-9][0-9]*}\n    invalidate: [\"client:{id}\"]\n")
	for _, path := range []string{"/other/1", "/clients/1"} { // no route, and a route's write
		c, err := net.Dial("tcp", strings.TrimPrefix(rep.proxy, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		go1 := make(chan struct{})
		release <- go1
		head := "PATCH " + path + " HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\nExpect: 100-continue\r\n\r\n"
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusContinue {
			t.Fatalf("PATCH %s: want the 100 first, got %v, %v", path, resp, err)
		}
		close(go1)
		resp, err = http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("PATCH %s: no answer: %v", path, err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "applied") || !resp.Close {
			t.Fatalf("PATCH %s: answered %s %q (Connection: close %v), err %v; want the upstream's 200, closed", path, resp.Status, b, resp.Close, err)
		}
		const size = 16 << 20
		chunk := fmt.Sprintf("%x\r\n%s\r\n0\r\nX-Sum: 1\r\n\r\n", size, strings.Repeat("b", size))
		if _, err := io.WriteString(c, chunk); err != nil {
			t.Fatalf("PATCH %s: the body owed after the 100, sent once the answer was read, met %v; want it drained (lingering close)", path, err)
		}
		if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Fatalf("PATCH %s: after the answer and the body read %d bytes, %v; want the end of the stream", path, n, err)
		}
	}
}
