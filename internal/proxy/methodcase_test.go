package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/route"
)

// rawMethod sends "method target HTTP/1.1" with the extra header lines
// hdr on a connection of its own (an HTTP client may normalise the
// method; net/http's does not, but the wire is what is tested), and
// returns the answer's status, Cache-Status and body.
func rawMethod(t *testing.T, e *env, method, target, hdr string) (int, string, string) {
	t.Helper()
	return rawRequest(t, e, fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: 0\r\nConnection: close\r\n\r\n", method, target, hdr))
}

// rawRequest writes head (a request line and header block, as sent) on a
// connection of its own and returns the answer's status, Cache-Status and
// body, after L1's pending writes have landed.
func rawRequest(t *testing.T, e *env, head string) (int, string, string) {
	t.Helper()
	c, err := net.Dial("tcp", e.front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	e.l1.Wait()
	return resp.StatusCode, cacheStatus(resp), string(b)
}

// TestMethodCaseRefused: a method spelled with a lower-case letter whose
// upper case the sidecar knows (get, Get, pOST, patch) is refused 400
// unsent, on every path: a cached route's read, a bypass, a batch
// route's id, a split list, no route (lean pass-through), an upgrade
// (tunnel). Method names are case-sensitive (RFC 9110 §9.1), so the
// sidecar took "get" for a write and forwarded it; an app that folds case
// (Werkzeug, ASP.NET Core) answered it 200 as the read, and the sidecar
// then dropped the URI on every replica: an anonymous read that wiped
// entries. A custom token ("frobnicate") spells no known method and is
// forwarded as before.
func TestMethodCaseRefused(t *testing.T) {
	var mu sync.Mutex
	var folded []string // calls the upstream received with a lower-case letter in the method
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != strings.ToUpper(r.Method) {
			mu.Lock()
			folded = append(folded, r.Method+" "+r.URL.RequestURI())
			mu.Unlock()
		}
		switch frameworkMethod(r) { // folds case, as Werkzeug does
		case http.MethodGet, http.MethodHead:
			fmt.Fprint(w, r.URL.Path)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	write := testRoute{Name: "client-write", Methods: []string{"PATCH", "PUT", "DELETE"}, Pattern: "/clients/{id}", Invalidate: []string{"client:{id}"}}
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user", MaxIDs: 10}}
	e := newEnv(t, up, []testRoute{clientRoute, write, userRoute(8, time.Millisecond), list}, withL1Invalidator)
	if r, b := e.get("/clients/7"); r.StatusCode != http.StatusOK || b != "/clients/7" {
		t.Fatalf("warm: %d %q", r.StatusCode, b)
	}
	calls := up.calls.Load()
	for _, target := range []struct{ path, hdr string }{
		{"/clients/7", ""},                  // cached route
		{"/clients/7", "Cookie: sid=a\r\n"}, // bypass
		{"/users/1", ""},                    // batch route
		{"/users?ids=1,2", ""},              // split list
		{"/elsewhere", ""},                  // no route: lean pass-through
		{"/elsewhere", "Connection: Upgrade\r\nUpgrade: websocket\r\n"}, // tunnel
	} {
		for _, m := range []string{"get", "Get", "gET", "head", "options", "pOST", "patch", "Put", "delete", "propfind"} {
			code, cs, body := rawMethod(t, e, m, target.path, target.hdr)
			if code != http.StatusBadRequest || !strings.Contains(cs, "detail=method-case") {
				t.Errorf("%s %s %q: %d %q (%s), want the sidecar's 400", m, target.path, target.hdr, code, body, cs)
			}
		}
	}
	if n := up.calls.Load(); n != calls {
		mu.Lock()
		t.Errorf("upstream calls %d, want none: a refused request is not sent (%q)", n-calls, folded)
		mu.Unlock()
	}
	if r, b := e.get("/clients/7"); b != "/clients/7" || !strings.Contains(r.Header.Get("Cache-Status"), "hit") {
		t.Errorf("the entry after the refusals: %q (%s), want the stored copy: no refused request drops it", b, r.Header.Get("Cache-Status"))
	}
	if code, _, _ := rawMethod(t, e, "frobnicate", "/elsewhere", ""); code != http.StatusNoContent || up.calls.Load() != calls+1 {
		t.Errorf("a custom lower-case method: %d, want forwarded (no known method's spelling)", code)
	}
}
