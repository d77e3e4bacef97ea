package proxy_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/route"
)

// TestSplitListIDsShareFirstCall: a cold list of 20 ids with max_size 100
// and a max_wait far shorter than the time its per-id goroutines take to
// start reaches the upstream in one bulk call of its 20 ids. Its ids used
// to reach the batcher one goroutine at a time, over several windows, each
// window's ids a call of the list's own: on a loaded machine more calls
// than the list's Budget(20) = 10, and a 502 with a healthy upstream.
func TestSplitListIDsShareFirstCall(t *testing.T) {
	const n = 20
	o := newBulkOrigin(t, usersAnswer(func(string) bool { return true }))
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	e := newEnv(t, o.upstream, []testRoute{userRoute(100, time.Microsecond), list})
	ids := make([]string, n)
	want := make([]string, n)
	for i := range ids {
		ids[i] = strconv.Itoa(i + 1)
		want[i] = userJSON(ids[i], nil)
	}
	r, b := e.get("/users?ids=" + strings.Join(ids, ","))
	if r.StatusCode != 200 || b != "["+strings.Join(want, ",")+"]" {
		t.Fatalf("status %d, body %q, want the %d elements in order", r.StatusCode, b, n)
	}
	if calls := o.snapshot(); len(calls) != 1 || len(calls[0].ids) != n {
		t.Errorf("%d bulk calls, want one of the list's %d ids", len(calls), n)
	}
}
