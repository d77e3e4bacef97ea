package proxy_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/route"
)

// TestBatchAnswerMadeForAnother is probe h1 D2: concurrent misses of
// different clients share one bulk call, made with the headers of the
// request that opened it. When the bulk answer cannot be shared — its Vary
// names a header the members may differ in (X-Forwarded-For, which the
// sidecar writes per client; User-Agent, forwarded but not grouped), or it
// is private — each member must still get the answer made for its own
// request: the opener the bulk call's, every other member (per-ID misses
// and a split list alike) one of its own call. Each client comes from its
// own address with its own User-Agent, and each element echoes both as
// the origin saw them.
func TestBatchAnswerMadeForAnother(t *testing.T) {
	cases := []struct {
		name   string
		header http.Header // on every bulk answer
		learn  bool        // a first request teaches the route User-Agent
	}{
		{"Vary X-Forwarded-For", http.Header{"Vary": {"X-Forwarded-For"}}, false},
		{"Cache-Control private", http.Header{"Cache-Control": {"private, max-age=60"}}, false},
		{"Set-Cookie", http.Header{"Set-Cookie": {"s=1"}}, false},
		{"Vary User-Agent", http.Header{"Vary": {"User-Agent"}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
				for k, v := range tc.header {
					w.Header()[k] = v
				}
				usersAnswer(func(string) bool { return true }, "X-Forwarded-For", "User-Agent")(w, r, ids)
			})
			// The batch goes when it holds the 5 ids of the 4 clients
			// below (max_size), never on a timer (max_wait: a hang guard).
			rt := userRoute(5, time.Minute)
			list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
			e := newEnv(t, o.upstream, []testRoute{rt, list})
			if tc.learn {
				// A list of 5 ids fills a batch alone; its answer names
				// User-Agent, which the route withheld: learned, forwarded
				// from then on (vary-withheld).
				a := fetchFrom("127.0.0.9", e.front.URL+"/users?ids=1,2,3,4,5", "learner")
				if a.err != nil || a.code != http.StatusOK {
					t.Fatalf("learning request: %d %v", a.code, a.err)
				}
			}
			before := len(o.snapshot())
			clients := []struct{ addr, path, ua string }{
				{"127.0.0.2", "/users/201", "iPhone"},
				{"127.0.0.3", "/users/202", "Desktop"},
				{"127.0.0.4", "/users/203", "Bot"},
				{"127.0.0.5", "/users?ids=204,205", "Tablet"},
			}
			got := make([]answer, len(clients))
			var wg sync.WaitGroup
			for i, c := range clients {
				wg.Go(func() { got[i] = fetchFrom(c.addr, e.front.URL+c.path, c.ua) })
			}
			wg.Wait()
			for i, c := range clients {
				a := got[i]
				if a.err != nil || a.code != http.StatusOK {
					t.Errorf("client %s %s: %d %v", c.addr, c.path, a.code, a.err)
					continue
				}
				var elems []map[string]any
				if strings.HasPrefix(a.body, "[") {
					if err := json.Unmarshal([]byte(a.body), &elems); err != nil {
						t.Fatalf("client %s: %q: %v", c.addr, a.body, err)
					}
				} else {
					var one map[string]any
					if err := json.Unmarshal([]byte(a.body), &one); err != nil {
						t.Fatalf("client %s: %q: %v", c.addr, a.body, err)
					}
					elems = append(elems, one)
				}
				for _, el := range elems {
					xff, _ := el["x-forwarded-for"].(string)
					ua, _ := el["user-agent"].(string)
					wantUA := "" // withheld until learned
					if tc.learn {
						wantUA = c.ua
					}
					if xff != c.addr || ua != wantUA {
						t.Errorf("client %s (%s) %s: element %v made for X-Forwarded-For %q, User-Agent %q: another client's answer",
							c.addr, c.ua, c.path, el["id"], xff, ua)
					}
				}
				if cc := a.header.Get("Cache-Control"); !strings.Contains(cc, "private") {
					t.Errorf("client %s: Cache-Control %q, want private", c.addr, cc)
				}
			}
			// One shared call, then one call of its own for each client
			// but the opener (the list's two ids in one).
			if n := len(o.snapshot()) - before; n != len(clients) {
				t.Errorf("%d bulk calls, want %d (the shared one, then one per client but the opener)", n, len(clients))
			}
			if n := o.perID.Load(); n != 0 {
				t.Errorf("%d per-ID calls, want none (a batch route's own calls are one-id bulk calls)", n)
			}
		})
	}
}

// fetchFrom GETs rawURL from the local address addr with User-Agent ua.
func fetchFrom(addr, rawURL, ua string) answer {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}
	c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableCompression: true, DisableKeepAlives: true}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, rawURL, nil)
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("User-Agent", ua)
	resp, err := c.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{code: resp.StatusCode, header: resp.Header, body: string(b), err: err}
}

// TestBatchIsolationRetryOwnHeaders: a shared bulk call that a bad id
// fails is retried per client request (isolation); a one-id request's
// retry is its own call, carrying its own headers, so a private answer to
// it is its own and it makes no third call (its budget is two: the shared
// call and its own). The retries carried the opener's headers: a member's
// private answer was made for another request, and the member fetched it
// once more (fetchOwnID), a third call for its id.
func TestBatchIsolationRetryOwnHeaders(t *testing.T) {
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		for _, id := range ids {
			if id == "666" {
				http.Error(w, "bad id", http.StatusBadRequest)
				return
			}
		}
		w.Header().Set("Cache-Control", "private, max-age=60")
		usersAnswer(func(string) bool { return true }, "X-Forwarded-For")(w, r, ids)
	})
	// The batch goes when it holds the 3 ids below, never on a timer.
	e := newEnv(t, o.upstream, []testRoute{userRoute(3, time.Minute)})
	clients := []struct{ addr, id string }{{"127.0.0.2", "1"}, {"127.0.0.3", "2"}, {"127.0.0.4", "666"}}
	got := make([]answer, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() { got[i] = fetchFrom(c.addr, e.front.URL+"/users/"+c.id, "ua") })
	}
	wg.Wait()
	for i, c := range clients[:2] {
		a := got[i]
		var el map[string]any
		if a.err != nil || a.code != http.StatusOK || json.Unmarshal([]byte(a.body), &el) != nil {
			t.Errorf("client %s /users/%s: %d %q %v", c.addr, c.id, a.code, a.body, a.err)
			continue
		}
		if xff, _ := el["x-forwarded-for"].(string); xff != c.addr {
			t.Errorf("client %s /users/%s: element made for %q", c.addr, c.id, xff)
		}
		n := 0
		for _, call := range o.snapshot() {
			if slices.Contains(call.ids, c.id) {
				n++
			}
		}
		if n > 2 {
			t.Errorf("/users/%s: in %d bulk calls, want at most 2 (the shared one, then its own)", c.id, n)
		}
	}
}
