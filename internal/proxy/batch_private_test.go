package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestRefusedOwnAnswerWithCookieNotShared: the upstream's own answer to a
// one-id bulk call (a 4xx, served as it came) that sets a cookie is its
// leader's alone. A request that joined the leader's flight meanwhile
// fetches on its own, and gets its own cookie, never the leader's: the
// answer's privacy is judged where the answer is made (fetchBulk), as the
// waiters' flights no longer read the entry's header for it.
func TestRefusedOwnAnswerWithCookieNotShared(t *testing.T) {
	var calls atomic.Int64
	arrived, release := make(chan struct{}), make(chan struct{})
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		n := calls.Add(1)
		if n == 1 {
			close(arrived)
			<-release
		}
		w.Header().Set("Set-Cookie", fmt.Sprintf("s=%d", n))
		http.Error(w, "refused", http.StatusForbidden)
	})
	e := newEnv(t, o.upstream, []testRoute{userRoute(20, time.Millisecond)})
	leader := make(chan answer, 1)
	go func() { leader <- fetch(context.Background(), e.front.URL+"/users/x1", nil) }()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the leader's bulk call")
	}
	var joined atomic.Int64
	type got struct {
		resp *http.Response
		body string
	}
	joiner := make(chan got, 1)
	go func() {
		resp, body := e.doCounted(http.MethodGet, "/users/x1", nil, &joined)
		joiner <- got{resp, body}
	}()
	waitFor(t, func() bool { return joined.Load() >= 1 }) // the second request waits on the flight
	close(release)

	if a := <-leader; a.err != nil || a.code != http.StatusForbidden || a.header.Get("Set-Cookie") != "s=1" {
		t.Fatalf("leader: %d %q %v, want 403 with its own cookie s=1", a.code, a.header.Get("Set-Cookie"), a.err)
	}
	j := <-joiner
	if j.resp.StatusCode != http.StatusForbidden || j.resp.Header.Get("Set-Cookie") != "s=2" {
		t.Errorf("joiner: %d %q, want 403 with a cookie of its own call (s=2)", j.resp.StatusCode, j.resp.Header.Get("Set-Cookie"))
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d bulk calls, want 2 (the joiner's own)", n)
	}
}
