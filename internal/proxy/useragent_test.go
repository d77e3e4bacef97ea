package proxy_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// uaOrigin answers as an app that serves each browser its own page and
// says so (Vary: User-Agent, RFC 9111 §4.1): the body names the
// User-Agent it saw, "none" when the request carried none. /ua/9 reads
// none and says no Vary.
func uaOrigin(t *testing.T) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ua/9" {
			fmt.Fprint(w, "plain")
			return
		}
		v := "none"
		if ua, ok := r.Header["User-Agent"]; ok {
			v = strings.Join(ua, "|")
		}
		w.Header().Set("Vary", "User-Agent")
		fmt.Fprintf(w, "ua=%s", v)
	})
}

// An answer that varies on User-Agent is stored as the variant of what
// its fetch sent. The cached path withholds User-Agent until an answer's
// Vary names it, and upreq sets an empty one on such a fetch so that Go
// sends none of its own: nothing goes on the wire. On the old code
// SentWithout took that empty value for a User-Agent sent, so the answer
// the origin made for no User-Agent was served to a client with
// "mobile/1.0" and stored as that client's variant (its next request a
// hit on it), and the route never learned to forward User-Agent: every
// User-Agent's variant was the answer to none. Now the fetch that
// withheld it is asked once more with it (the route learns it), each
// client gets its own, and a client that sends none, or an empty one
// (which no fetch can send: net/http drops it), gets the answer to none
// in one fetch, stored as its own variant. And once the route forwards
// User-Agent, a fetch whose client sent none still sends none (upreq's
// empty value): an answer of the route that does not name User-Agent in
// Vary was shaped by none and is stored (on the old code it was refused
// as one whose fetch carried a learned header, vary-unnamed).
func TestVaryUserAgentIsWhatWasSent(t *testing.T) {
	up := uaOrigin(t)
	e := newEnv(t, up, []testRoute{{Name: "ua", Pattern: "/ua/{id}", TTL: time.Minute}})
	ask := func(path string, ua []string, want string, calls int64, hit bool) {
		t.Helper()
		before := up.calls.Load()
		resp, body := e.do(http.MethodGet, path, http.Header{"User-Agent": ua})
		got := up.calls.Load() - before
		if body != want || got != calls || strings.Contains(cacheStatus(resp), "hit") != hit {
			t.Fatalf("%s, User-Agent %q: %q after %d upstream calls (%s), want %q after %d (hit %v)",
				path, ua, body, got, cacheStatus(resp), want, calls, hit)
		}
	}
	// Withheld at first: the fetch sent none, so it is asked once more.
	ask("/ua/1", []string{"mobile/1.0"}, "ua=mobile/1.0", 2, false)
	ask("/ua/1", []string{"desktop/2.0"}, "ua=desktop/2.0", 1, false)
	ask("/ua/1", []string{"mobile/1.0"}, "ua=mobile/1.0", 0, true)
	ask("/ua/1", []string{"desktop/2.0"}, "ua=desktop/2.0", 0, true)
	// The Go client sends no User-Agent for an empty one.
	ask("/ua/1", []string{""}, "ua=none", 1, false)
	ask("/ua/1", []string{""}, "ua=none", 0, true)
	ask("/ua/9", []string{""}, "plain", 1, false)
	ask("/ua/9", []string{""}, "plain", 0, true)

	// An empty User-Agent on the wire: one fetch (it sends none, the
	// client carried none the sidecar could send), stored as its own
	// variant.
	for i, want := range []struct {
		calls int64
		hit   bool
	}{{1, false}, {0, true}} {
		before := up.calls.Load()
		status, body := rawGet(t, e, "/ua/1", "User-Agent: \r\n")
		if got := up.calls.Load() - before; body != "ua=none" || got != want.calls || strings.Contains(status, "hit") != want.hit {
			t.Fatalf("empty User-Agent, request %d: %q after %d upstream calls (%s), want \"ua=none\" after %d (hit %v)",
				i, body, got, status, want.calls, want.hit)
		}
	}
}

// rawGet sends GET path with the extra header lines hdr on a connection
// of its own, and returns the answer's Cache-Status and body.
func rawGet(t *testing.T, e *env, path, hdr string) (string, string) {
	t.Helper()
	_, cs, body := rawRequest(t, e, fmt.Sprintf("GET %s HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n", path, hdr))
	return cs, body
}
