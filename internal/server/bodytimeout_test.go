package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A request whose body is still arriving at read_timeout is answered
// 408 Request Timeout and its connection closed (RFC 9110 §15.5.9; NGINX's
// client_body_timeout), on every path that reads a body: a write route
// (invalidation), an unsafe method on a cached route, and a path no route
// names; each with the body sent at once, and sent behind Expect:
// 100-continue once the 100 came (RFC 9110 §10.1.1). The origin here acts
// on the truncated body (201), as a lenient one might; that answer never
// reaches the client. On the old code the client was sent net/http's
// implicit empty 200 (no Via, no Cache-Status): a write that never arrived
// whole, told it succeeded; until the body behind Expect was watched too,
// that one still was ("answered 200 OK").
func TestTrickledBodyAnswered408(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		expect       bool
	}{
		{"POST", "/clients/7", false},  // write route, invalidate: client:{id}
		{"PUT", "/clients/7", false},   // unsafe method on a cached route
		{"PUT", "/elsewhere", false},   // no route: pass-through
		{"POST", "/elsewhere/", false}, // no route, POST
		{"POST", "/clients/7", true},
		{"PUT", "/clients/7", true},
		{"PUT", "/elsewhere", true},
		{"POST", "/elsewhere/", true},
	} {
		name := tc.method + " " + tc.path
		if tc.expect {
			name += " expect"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, "upstream!")
			}))
			t.Cleanup(origin.Close)
			rep := startReplicaYAML(t, fmt.Sprintf(timeoutConfig, origin.URL))
			resp, rest := trickle(t, rep, tc.method, tc.path, tc.expect)
			if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
				t.Fatalf("answered %s (Connection: close %v, Via %q), want 408 and the connection closed", resp.Status, resp.Close, resp.Header.Get("Via"))
			}
			if rest != "" {
				t.Errorf("after the 408 the connection carried %q, want it closed", rest)
			}
			if n := edgeRefused(t, rep)["read-timeout"]; n != 1 {
				t.Errorf("read-timeout counted %v, want 1", n)
			}
		})
	}
}

// A write cut at read_timeout after its header went upstream may have been
// applied (the origin may act on what it got): lenient for invalidation, it
// invalidates as a write sent whole with no answer does. On the old code
// the cached answer stayed a hit.
func TestTrickledWriteInvalidates(t *testing.T) {
	var gets atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			fmt.Fprintf(w, "v%d", gets.Add(1))
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(origin.Close)
	rep := startReplicaYAML(t, fmt.Sprintf(timeoutConfig, origin.URL))
	rep.do(t, "GET", "/clients/7")
	if _, _, body := rep.do(t, "GET", "/clients/7"); body != "v1" || gets.Load() != 1 {
		t.Fatalf("second GET %q after %d origin GETs, want the stored v1", body, gets.Load())
	}
	if resp, _ := trickle(t, rep, "POST", "/clients/7", false); resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("trickled write answered %s, want 408", resp.Status)
	}
	if _, _, body := rep.do(t, "GET", "/clients/7"); body != "v2" {
		t.Errorf("GET after the cut write: %q, want v2 from the origin (invalidated)", body)
	}
}

// trickle sends a request announcing a 10-byte body, sends 4 bytes of it
// and no more, and reads the answer and whatever follows it until the
// connection closes (a long deadline, as a hang guard only). With expect,
// the request carries Expect: 100-continue and the 4 bytes go once the
// 100 Continue came, as a client that waits for it sends them.
func trickle(t *testing.T, rep *replica, method, path string, expect bool) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(rep.proxy, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(conn)
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: clients.svc\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n", method, path)
	if expect {
		fmt.Fprintf(conn, "%sExpect: 100-continue\r\n\r\n", head)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusContinue {
			t.Fatalf("before the body: %v (%v), want 100 Continue", resp, err)
		}
		io.WriteString(conn, "0123")
	} else {
		fmt.Fprintf(conn, "%s\r\n0123", head)
	}
	resp, err := http.ReadResponse(br, nil)
	for n := 0; err == nil && resp.StatusCode == http.StatusContinue && n < 8; n++ {
		// The upstream's 100 may be relayed beside net/http's own: a
		// client takes any number of 1xx (RFC 9110 §15.2).
		resp, err = http.ReadResponse(br, nil)
	}
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatalf("answer's body: %v", err)
	}
	resp.Body.Close()
	rest, _ := io.ReadAll(br)
	return resp, string(rest)
}
