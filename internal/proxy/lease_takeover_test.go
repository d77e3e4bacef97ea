package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/redistest"
)

// takeoverIDs is how many cold ids the dead holder held the leases of.
const takeoverIDs = 20

// takeoverAnswer is one client's answer for one id.
type takeoverAnswer struct {
	id  int
	got string
}

// deadHolder has a lease holder die while it holds the leases of ids
// 1..takeoverIDs of the batch route rt: a shared-tier client of the
// test's own that took them and then stops (closed: no renewal, no
// release), as a kill -9 leaves them. Replicas B and C, each asked for
// every id, wait on those leases; then the leases lapse at one instant:
// the test drops them in one DEL, as a Redis failover that lost them
// does, and as they expire together when their renewals last landed
// together. before runs once the replicas learned the route's keys (id
// 999, fetched through B), before the ids are asked for. It returns
// every client's answer.
func deadHolder(t *testing.T, up *upstream, rt testRoute, before func()) []takeoverAnswer {
	t.Helper()
	srv := redistest.Start(t)
	opts := l2.Options{Addrs: []string{srv.Addr()}, Timeout: 2 * time.Second}
	b := newLeaseReplicaOf(t, opts, up, rt)
	c := newLeaseReplicaOf(t, opts, up, rt)

	// The key of an id, as the replicas build it: learned from id 999's.
	if got := b.fetch("/users/999"); !strings.HasPrefix(got, "200 ") {
		t.Fatalf("/users/999 answered %q", got)
	}
	flush(t, b)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	ctx := context.Background()
	keys, err := rc.Keys(ctx, "lease:e:*999*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("entry keys of id 999 = %q, %v", keys, err)
	}
	keyOf := func(id int) string {
		return strings.Replace(strings.TrimPrefix(keys[0], "lease:e:"), "999", strconv.Itoa(id), 1)
	}
	// The holder's leases are held a minute, not renewed every third of a
	// second: on a loaded machine a late renewal let a lease lapse before
	// every waiter had joined, and the wait below never completed. The
	// lapse the test means is the DEL after the holder dies.
	holder, err := l2.New(ctx, l2.Options{Addrs: []string{srv.Addr()}, Timeout: 2 * time.Second, Prefix: "lease:", LeaseHold: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	var leaseKeys []string
	for id := 1; id <= takeoverIDs; id++ {
		if _, ok, _, err := holder.Lease(ctx, keyOf(id), time.Hour); err != nil || !ok {
			t.Fatalf("the holder's lease of id %d: %v, %v", id, ok, err)
		}
		leaseKeys = append(leaseKeys, "lease:l:"+keyOf(id))
	}
	before()

	answers := make(chan takeoverAnswer, 2*takeoverIDs)
	for id := 1; id <= takeoverIDs; id++ {
		for _, r := range []*leaseReplica{b, c} {
			go func() { answers <- takeoverAnswer{id, r.fetch("/users/" + strconv.Itoa(id))} }()
		}
	}
	waitUntil(t, "B and C wait on the holder's leases", func() bool {
		return b.waits.Load() >= takeoverIDs && c.waits.Load() >= takeoverIDs
	})
	_ = holder.Close() // killed: no renewals, no releases
	if n, err := rc.Del(ctx, leaseKeys...).Result(); err != nil || n != takeoverIDs {
		t.Fatalf("DEL of the holder's leases = %d, %v; want all %d", n, err, takeoverIDs)
	}
	var got []takeoverAnswer
	for range cap(answers) {
		got = append(got, <-answers)
	}
	return got
}

// takeoverOrigin is a bulk origin that records its calls once reset.
type takeoverOrigin struct {
	*bulkOrigin
	counts *idCounts
	mu     sync.Mutex
	calls  [][]string
}

func newTakeoverOrigin(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, ids []string)) *takeoverOrigin {
	o := &takeoverOrigin{counts: &idCounts{n: map[string]*atomic.Int64{}}}
	o.bulkOrigin = newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		o.counts.add(ids)
		o.mu.Lock()
		o.calls = append(o.calls, ids)
		o.mu.Unlock()
		answer(w, r, ids)
	})
	return o
}

// restart forgets the calls so far.
func (o *takeoverOrigin) restart() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.counts = &idCounts{n: map[string]*atomic.Int64{}}
	o.calls = nil
}

func (o *takeoverOrigin) sizes() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	var sizes []int
	for _, c := range o.calls {
		sizes = append(sizes, len(c))
	}
	return sizes
}

// The dead holder's ids reach the origin once each for the cluster, every
// client gets its 200, and each surviving replica takes its share of the
// lapsed leases over in one round, whose ids join its batcher together:
// at most one bulk call per surviving replica (max_size 100 holds all 20
// ids; one group, as every client forwards the same headers), so at most
// two in all. Before the takeovers were gathered (D3), each waiter found
// its own lease lapsed on its own poll (WaitFill, 2-20 ms apart) and
// joined a batch alone: the 20 ids went out in 4-10 calls of 1-10 ids.
func TestLeaseBatchedTakeoverOncePerID(t *testing.T) {
	o := newTakeoverOrigin(t, usersAnswer(func(string) bool { return true }))
	got := deadHolder(t, o.upstream, userRoute(100, 2*time.Millisecond), o.restart)
	for _, a := range got {
		if want := fmt.Sprintf(`200 {"id":%d`, a.id); !strings.HasPrefix(a.got, want) {
			t.Errorf("/users/%d answered %q, want %s…", a.id, a.got, want)
		}
	}
	for id := 1; id <= takeoverIDs; id++ {
		if n := o.counts.of(strconv.Itoa(id)); n != 1 {
			t.Errorf("id %d fetched %d times after the holder died, want once (one takeover for the cluster)", id, n)
		}
	}
	sizes := o.sizes()
	t.Logf("bulk calls after the holder died: sizes %v", sizes)
	if len(sizes) > 2 {
		t.Errorf("%d bulk calls after the holder died, sizes %v; want at most one per surviving replica (2)", len(sizes), sizes)
	}
}

// A takeover's bulk call that fails gives each of its ids a clear error,
// never a body: the upstream answers 503 to every call once the holder's
// leases are set. Each client gets a 502 (a failed bulk call); each id
// reaches the origin at most once per replica (the replica that took its
// lease over, and the other, whose waiter fetches its own once the lease
// is let go without a fill), never in a retry of the failed call.
func TestLeaseBatchedTakeoverCallFails(t *testing.T) {
	var failing atomic.Bool
	o := newTakeoverOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		if failing.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		usersAnswer(func(string) bool { return true })(w, r, ids)
	})
	got := deadHolder(t, o.upstream, userRoute(100, 2*time.Millisecond), func() {
		o.restart()
		failing.Store(true)
	})
	for _, a := range got {
		if !strings.HasPrefix(a.got, "502 ") || strings.Contains(a.got, `"id"`) {
			t.Errorf("/users/%d answered %q, want a 502 without a body of the upstream's", a.id, a.got)
		}
	}
	for id := 1; id <= takeoverIDs; id++ {
		if n := o.counts.of(strconv.Itoa(id)); n < 1 || n > 2 {
			t.Errorf("id %d asked for %d times, want once or twice (once per replica)", id, n)
		}
	}
}

// A bad id among the taken-over ones fails alone: the origin answers 400
// to any bulk call that holds id 7. The taken-over ids are one-id
// requests in their batch, so the failed call is retried per id, each
// with its own request's headers: every other id gets its own element,
// and id 7 the origin's 400, never another id's body.
func TestLeaseBatchedTakeoverBadID(t *testing.T) {
	o := newTakeoverOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		if slices.Contains(ids, "7") {
			http.Error(w, "bad id 7", http.StatusBadRequest)
			return
		}
		usersAnswer(func(string) bool { return true })(w, r, ids)
	})
	got := deadHolder(t, o.upstream, userRoute(100, 2*time.Millisecond), o.restart)
	for _, a := range got {
		want := fmt.Sprintf(`200 {"id":%d`, a.id)
		if a.id == 7 {
			want = "400 bad id 7"
		}
		if !strings.HasPrefix(a.got, want) {
			t.Errorf("/users/%d answered %q, want %s…", a.id, a.got, want)
		}
	}
}
