package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/proxy"
	"github.com/sidecache/sidecache/internal/route"
)

// silentOrigin is an upstream that never sends 100 Continue, as many
// servers behind a proxy do not: it reads each request with
// http.ReadRequest (no net/http server to answer an Expect), records the
// Expect it carried, reads the body and echoes it.
type silentOrigin struct {
	url     *url.URL
	mu      sync.Mutex
	expects []string // each request's Expect, "" none
}

func newSilentOrigin(t *testing.T) *silentOrigin {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &silentOrigin{}
	o.url, _ = url.Parse("http://" + ln.Addr().String())
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			t.Cleanup(func() { c.Close() }) // before the Wait: cleanups run last-in first
			go func() {
				defer conns.Done()
				defer c.Close()
				o.serve(c)
			}()
		}
	}()
	return o
}

func (o *silentOrigin) serve(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		o.mu.Lock()
		o.expects = append(o.expects, req.Header.Get("Expect"))
		o.mu.Unlock()
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\nbody=%s", 5+len(body), body); err != nil {
			return
		}
	}
}

// took returns the Expect of the requests received since the last call.
func (o *silentOrigin) took() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.expects
	o.expects = nil
	return e
}

// A client's Expect: 100-continue is answered by the sidecar, as NGINX
// answers it, and never forwarded (RFC 9110 §10.1.1): net/http's server
// sends the client its 100 as the body is first read, and the body goes
// upstream at once. On the old code the ReverseProxy way forwarded the
// Expect, so http.Transport held the body back for the upstream's own 100,
// which an upstream that ignores Expect never sends: every such request
// waited out the Transport's ExpectContinueTimeout (1 s), and the client's
// 100 with it. The origin here never sends a 100: each client below must
// get its 100 from the sidecar before it sends its body, and the origin
// must see no Expect — on a write (invalidating), a pass-through with a
// body (POST, and a GET with one), and a body-less read, which the lean
// loop now takes with its Expect left out.
func TestExpectAnsweredBySidecar(t *testing.T) {
	origin := newSilentOrigin(t)
	writes := testRoute{Name: "w", Methods: []string{http.MethodPut}, Pattern: "/w/{id}", Invalidate: []string{"w:{id}"}}
	e := newEnv(t, &upstream{}, []testRoute{writes}, withL1Invalidator, func(o *proxy.Options, _ *l1.Store) { o.Upstream = origin.url })
	for _, tc := range []struct {
		name, method, path, body string
	}{
		{"write", http.MethodPut, "/w/1", "data"},
		{"pass-through POST", http.MethodPost, "/elsewhere", "data"},
		{"pass-through GET with a body", http.MethodGet, "/elsewhere", "data"},
		{"lean loop, no body", http.MethodGet, "/elsewhere", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", e.front.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			length := ""
			if tc.body != "" {
				length = fmt.Sprintf("Content-Length: %d\r\n", len(tc.body))
			}
			fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\n%sExpect: 100-continue\r\n\r\n", tc.method, tc.path, length)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.body != "" {
				// The origin sends no 100: this one is the sidecar's,
				// and the body has not been sent yet.
				if resp.StatusCode != http.StatusContinue {
					t.Fatalf("%s before the body was sent, want 100 Continue", resp.Status)
				}
				if _, err := io.WriteString(c, tc.body); err != nil {
					t.Fatal(err)
				}
				if resp, err = http.ReadResponse(br, nil); err != nil {
					t.Fatal(err)
				}
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || string(b) != "body="+tc.body {
				t.Fatalf("answer %s %q, want 200 %q", resp.Status, b, "body="+tc.body)
			}
			if got := origin.took(); len(got) != 1 || got[0] != "" {
				t.Fatalf("the origin received Expect %q, want one request without Expect", got)
			}
		})
	}
}

// No fetch of the cached path carries a client's Expect either: not the
// per-key fill, the bulk call or a split list's, even on routes that
// forward every header (forward_headers: all). On the old code they
// forwarded it as any other header.
func TestExpectNeverReachesCachedCalls(t *testing.T) {
	var mu sync.Mutex
	var got []string
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Path+" Expect="+r.Header.Get("Expect"))
		mu.Unlock()
		if r.URL.Path == "/users" {
			usersAnswer(func(string) bool { return true })(w, r, bulkIDs(r.URL.RawQuery))
			return
		}
		_, _ = w.Write([]byte("x"))
	})
	bulk := userRoute(10, time.Millisecond)
	bulk.ForwardAll = true
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user", MaxIDs: 8}}
	e := newEnv(t, up, []testRoute{{Name: "a", Pattern: "/a/{id}", TTL: time.Minute, ForwardAll: true}, bulk, list})
	hdr := http.Header{"Expect": {"100-continue"}}
	for _, path := range []string{"/a/1", "/users/1", "/users?ids=2,3"} {
		if resp, body := e.do(http.MethodGet, path, hdr); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s %q", path, resp.Status, body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 3 { // the list's ids may take one bulk call or two
		t.Fatalf("upstream calls %q, want a fill and bulk calls", got)
	}
	for _, call := range got {
		if !strings.HasSuffix(call, " Expect=") {
			t.Errorf("upstream call %s: a client's Expect forwarded", call)
		}
	}
}
