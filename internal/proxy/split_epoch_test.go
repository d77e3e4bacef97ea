package proxy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/redistest"
	"github.com/sidecache/sidecache/internal/route"
)

// delEpochs deletes every epoch key under prefix, as eviction would.
func delEpochs(t *testing.T, addr, prefix string) int {
	t.Helper()
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	keys, err := rc.Keys(ctx, prefix+"v:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		if err := rc.Del(ctx, keys...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return len(keys)
}

// TestSplitListAfterEpochLost: a split list's good id whose L2 copy reads
// as a miss because its epoch key is gone (evicted: DEL here) is fetched
// again and answered, never a 502: the list on the replica that did not
// fetch it (L2's many-key read: a miss, not an error), again once
// refetched, on the replica whose L1 holds it, and the one-id read.
func TestSplitListAfterEpochLost(t *testing.T) {
	srv := redistest.Start(t)
	o := newBulkOrigin(t, nil)
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	opts := l2.Options{Addrs: []string{srv.Addr()}, Timeout: 2 * time.Second}
	a := newLeaseReplicaOf(t, opts, o.upstream, userRoute(32, 2*time.Millisecond), list)
	b := newLeaseReplicaOf(t, opts, o.upstream, userRoute(32, 2*time.Millisecond), list)
	if got := a.fetch("/users/38"); !strings.HasPrefix(got, `200 {"id":38`) {
		t.Fatalf("warming /users/38 on a: %q", got)
	}
	if err := a.l2.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := delEpochs(t, srv.Addr(), "lease:"); n == 0 {
		t.Fatal("no epoch keys to delete")
	}
	for i, step := range []struct {
		r    *leaseReplica
		path string
	}{
		{b, "/users?ids=38"}, {b, "/users?ids=38"}, {a, "/users?ids=38"}, {b, "/users/38"},
	} {
		if got := step.r.fetch(step.path); !strings.HasPrefix(got, `200 [`) && !strings.HasPrefix(got, `200 {"id":38`) {
			t.Errorf("step %d: %s answered %q, want 200", i, step.path, got)
		}
	}
}

// TestSplitRetryOwnHeaders: a list of one good id whose copy is missing
// (its epoch evicted, or never stored: private answers) joins a batch
// another client's bad id opened; the shared call fails and is retried
// per client request. The list's retry carries the list's own headers, as
// a one-id request's does (TestBatchIsolationRetryOwnHeaders), so its
// private answer is its own: 200, made for the list's client, 38 in two
// calls at most. The retry carried the opener's headers: the answer was
// made for another request (flight.foreign), the list's own call was a
// third past its budget of two, and the good id answered 502 (the
// invariant harness's collateral, seed 4, GET /u?ids=38).
func TestSplitRetryOwnHeaders(t *testing.T) {
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		if slices.Contains(ids, "666") {
			http.Error(w, "bad id", http.StatusBadRequest)
			return
		}
		w.Header().Set("Cache-Control", "private, max-age=60")
		usersAnswer(func(string) bool { return true }, "X-Forwarded-For")(w, r, ids)
	})
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	// The batch goes when it holds 2 ids, never on a timer: the bad id's
	// request opens it, the list's id joins it.
	e := newEnv(t, o.upstream, []testRoute{userRoute(2, time.Minute), list})
	bad := make(chan answer, 1)
	go func() { bad <- fetchFrom("127.0.0.4", e.front.URL+"/users/666", "ua") }()
	waitUntil(t, "the bad id queued", func() bool { return e.h.BatchQueued("user") == 1 })
	a := fetchFrom("127.0.0.2", e.front.URL+"/users?ids=38", "ua")
	var els []map[string]any
	if a.err != nil || a.code != http.StatusOK || json.Unmarshal([]byte(a.body), &els) != nil || len(els) != 1 {
		t.Fatalf("list of 38: %d %q %v (calls %v)", a.code, a.body, a.err, o.snapshot())
	}
	if xff, _ := els[0]["x-forwarded-for"].(string); xff != "127.0.0.2" {
		t.Errorf("list of 38: element made for %q, want the list's client", xff)
	}
	n := 0
	for _, c := range o.snapshot() {
		if slices.Contains(c.ids, "38") {
			n++
		}
	}
	if n > 2 {
		t.Errorf("38 in %d bulk calls, want at most 2 (the shared one, then the list's own)", n)
	}
	if b := <-bad; b.code != http.StatusBadRequest {
		t.Errorf("/users/666: %d %q, want the upstream's 400", b.code, b.body)
	}
}
