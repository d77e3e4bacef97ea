package l2

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/redistest"
)

// junkKeys is how many keys the large-keyspace tests put under the
// prefix: some 300 SCAN pages, so a purge of everything takes many rounds.
const junkKeys = 300_000

// populate puts n junk keys under prefix+"e:" with DEBUG POPULATE (one
// command, no client round trip per key).
func populate(t *testing.T, rc *redis.Client, prefix string, n int) {
	t.Helper()
	if err := rc.Do(context.Background(), "DEBUG", "POPULATE", n, prefix+"e:junk", 8).Err(); err != nil {
		t.Fatalf("DEBUG POPULATE: %v", err)
	}
}

// countKeys counts the keys matching pattern (SCAN, not KEYS: the server
// is shared with nothing, but the habit costs nothing).
func countKeys(t *testing.T, rc *redis.Client, pattern string) int {
	t.Helper()
	n := 0
	iter := rc.Scan(context.Background(), 0, pattern, 5000).Iterator()
	for iter.Next(context.Background()) {
		n++
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPurgeAllLargeKeyspaceSlowRounds: a purge of everything over a few
// hundred thousand keys, with a tight per-round timeout and Redis refusing
// writes for a while (CLIENT PAUSE WRITE: the UNLINK rounds and the
// epochs' pipeline time out), completes or says what it did, and no entry
// stored before it is read afterwards, by either replica, even one a
// peer's fill stores after the sweep went past it. Before: the first
// UNLINK round that ran out of its Timeout failed the whole purge (after
// part of the keys were gone), and the sweep deleted the epoch keys, so a
// fill that began before the purge and stored after it was served.
func TestPurgeAllLargeKeyspaceSlowRounds(t *testing.T) {
	srv := redistest.Start(t, "--enable-debug-command", "yes")
	tight := func(o *Options) { o.Timeout = 20 * time.Millisecond; o.FailureThreshold = 1 << 30 }
	a := newReplica(t, []string{srv.Addr()}, tight)
	b := newReplica(t, []string{srv.Addr()}, tight)
	rc := raw(t, srv.Addr())
	ctx := context.Background()
	const routeTag = "_route:r"

	populate(t, rc, "test:", junkKeys)
	before := make([]string, 50)
	for i := range before {
		before[i] = "GET svc/p/" + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + string(rune('0'+i/26))
		if err := a.Set(ctx, before[i], entry("v0", time.Hour, routeTag, "page:1")); err != nil {
			t.Fatal(err)
		}
	}
	a.flush(t)
	// A fill in flight on the peer: its request left before the purge.
	late := entry("v0-late", time.Hour, routeTag)

	if err := rc.Do(ctx, "CLIENT", "PAUSE", 300, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	rep, err := a.PurgeAll(ctx, routeTag)
	if err != nil {
		t.Fatalf("PurgeAll: %v (report %+v)", err, rep)
	}
	t.Logf("purge all: %+v", rep)
	left := countKeys(t, rc, "test:e:*")
	switch {
	case rep.Complete && left != 0:
		t.Errorf("sweep reported complete with %d entry keys left", left)
	case !rep.Complete && rep.SweepErr == nil:
		t.Errorf("sweep incomplete (%d entry keys left) without saying why", left)
	case !rep.Complete && rep.Unlinked+left < junkKeys:
		t.Errorf("sweep reports %d removed, %d left: fewer than the %d put there", rep.Unlinked, left, junkKeys)
	}
	if inv := b.nextInvalidation(t, 10*time.Second); !inv.All {
		t.Fatalf("peer got %+v, want All", inv)
	}

	if err := b.Set(ctx, "GET svc/p/late", late); err != nil {
		t.Fatal(err)
	}
	b.flush(t)
	for _, r := range []*replica{a, b} {
		for _, k := range append(before, "GET svc/p/late") {
			if e, ok := r.mustGet(t, k); ok {
				t.Fatalf("%s read after the purge of everything: %q", k, e.Body)
			}
		}
	}
}

// TestPurgeAllHoldsWhenTheSweepStops: a sweep that cannot run at all (its
// context is over) reports what it did and why, and the invalidation
// before it still makes every entry a miss on every replica, though the
// keys are still in Redis.
func TestPurgeAllHoldsWhenTheSweepStops(t *testing.T) {
	srv := redistest.Start(t)
	a := newReplica(t, []string{srv.Addr()})
	b := newReplica(t, []string{srv.Addr()})
	rc := raw(t, srv.Addr())
	ctx := context.Background()
	const routeTag = "_route:r"
	for _, k := range []string{"k1", "k2"} {
		if err := a.Set(ctx, k, entry("v0", time.Hour, routeTag)); err != nil {
			t.Fatal(err)
		}
	}
	a.flush(t)

	if err := a.invalidateAll(ctx, []string{routeTag}); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	rep := a.sweep(done)
	if rep.Complete || rep.SweepErr == nil || rep.Unlinked != 0 {
		t.Fatalf("sweep with its context over: %+v, want incomplete with an error and nothing removed", rep)
	}
	if n := countKeys(t, rc, "test:e:*"); n != 2 {
		t.Fatalf("%d entry keys in redis, want the 2 the sweep did not reach", n)
	}
	for _, r := range []*replica{a, b} {
		for _, k := range []string{"k1", "k2"} {
			if e, ok := r.mustGet(t, k); ok {
				t.Fatalf("%s read after the purge of everything: %q", k, e.Body)
			}
		}
	}
}

// TestPurgeAllEmptyPrefixKeepsOthersKeys: with an explicit empty prefix
// (docs/configuration.md allows it) a purge of everything removes
// sidecache's own keys (entries P e:, leases P l:) and no other key in the
// database. Before: the sweep matched "*" and unlinked every key, another
// application's sessions included.
func TestPurgeAllEmptyPrefixKeepsOthersKeys(t *testing.T) {
	srv := redistest.Start(t)
	a := newReplica(t, []string{srv.Addr()}, func(o *Options) { o.Prefix = "" })
	rc := raw(t, srv.Addr())
	ctx := context.Background()
	const routeTag = "_route:r"
	foreign := []string{"app:session:42", "counter", "x", "ex:ample", "lx", "run:app"}
	for _, k := range foreign {
		if err := rc.Set(ctx, k, "theirs", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"k1", "k2"} {
		if err := a.Set(ctx, k, entry("v0", time.Hour, routeTag)); err != nil {
			t.Fatal(err)
		}
	}
	a.flush(t)
	release, acquired, _, err := a.Lease(ctx, "k3", time.Hour)
	if err != nil || !acquired {
		t.Fatalf("lease: acquired %v, %v", acquired, err)
	}
	defer release(0)
	if n := countKeys(t, rc, "e:*") + countKeys(t, rc, "l:*"); n != 3 {
		t.Fatalf("%d sidecache entry and lease keys before the purge, want 3", n)
	}

	rep, err := a.PurgeAll(ctx, routeTag)
	if err != nil || !rep.Complete {
		t.Fatalf("PurgeAll: %+v, %v", rep, err)
	}
	if rep.Unlinked != 3 {
		t.Fatalf("purge unlinked %d keys, want sidecache's 3", rep.Unlinked)
	}
	for _, k := range foreign {
		if v, err := rc.Get(ctx, k).Result(); err != nil || v != "theirs" {
			t.Fatalf("another application's key %q after the purge: %q, %v", k, v, err)
		}
	}
	if n := countKeys(t, rc, "e:*") + countKeys(t, rc, "l:*"); n != 0 {
		t.Fatalf("%d sidecache entry and lease keys after the purge, want 0", n)
	}
	if n := countKeys(t, rc, "v:*"); n == 0 {
		t.Fatal("the purge removed the epoch keys it must keep")
	}
}
