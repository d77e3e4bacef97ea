package l2

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/redistest"
)

// A tag's epoch key raised by a write and then evicted must not come back
// below the entries fetched before that write when the next fill of the
// tag recreates it: they would be current again, long after the write was
// acknowledged (probe E1: /clients/N?fields=a served as an L2 hit 14 s
// after a PUT). The same for a route purge, whose one epoch key covers
// every entry of the route (probe E2). Redis is made to evict, then DEL
// picks which keys it took.
func TestEvictedEpochKeepsOldEntriesOut(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru")
	r := newReplica(t, []string{srv.Addr()})
	rc := raw(t, srv.Addr())
	ctx := context.Background()
	makeEvict(t, rc)
	before := time.Now().Add(-time.Second) // the pre-write fills' requests
	// The tags' keys as their first fills, before Redis began to evict,
	// left them.
	tags := []string{"client:7", "_uri:/clients/7", "_route:client"}
	for i := range 20 {
		tags = append(tags, "client:"+strconv.Itoa(100+i))
	}
	for _, tag := range tags {
		if err := rc.Set(ctx, r.epochKey(tag), "0", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}

	// E1: one resource read with a query, then written.
	old := entry("v0", time.Hour, "client:7", "_uri:/clients/7", "_route:client")
	old.StoredAt = before
	if err := r.Set(ctx, "GET svc/clients/7?fields=a", old); err != nil {
		t.Fatal(err)
	}
	// E2: 20 entries of one route, purged by route.
	for i := range 20 {
		e := entry("v0", time.Hour, "client:"+strconv.Itoa(100+i), "_route:client")
		e.StoredAt = before
		if err := r.Set(ctx, fmt.Sprintf("GET svc/clients/%d", 100+i), e); err != nil {
			t.Fatal(err)
		}
	}
	r.flush(t)
	if _, ok := r.mustGet(t, "GET svc/clients/7?fields=a"); !ok {
		t.Fatal("miss before the write")
	}

	if err := r.InvalidateTags(ctx, "client:7", "_uri:/clients/7"); err != nil {
		t.Fatal(err)
	}
	if err := r.InvalidateTags(ctx, "_route:client"); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"client:7", "_uri:/clients/7", "_route:client"} {
		if n := rc.Del(ctx, r.epochKey(tag)).Val(); n != 1 {
			t.Fatalf("DEL %s = %d, want 1", r.epochKey(tag), n)
		}
	}

	// Ordinary fills after the write, with the same tags, recreate the keys.
	fresh := entry("v1", time.Hour, "client:7", "_uri:/clients/7", "_route:client")
	fresh.StoredAt = time.Now()
	if err := r.Set(ctx, "GET svc/clients/7", fresh); err != nil {
		t.Fatal(err)
	}
	r.flush(t)

	if e, ok := r.mustGet(t, "GET svc/clients/7?fields=a"); ok {
		t.Errorf("E1: pre-write entry %q served after its epochs were lost and recreated", e.Body)
	}
	served := 0
	for i := range 20 {
		if _, ok := r.mustGet(t, fmt.Sprintf("GET svc/clients/%d", 100+i)); ok {
			served++
		}
	}
	if served != 0 {
		t.Errorf("E2: %d/20 pre-purge entries served after the route's epoch was lost and recreated", served)
	}
	later := entry("v1", time.Hour, "client:7", "_uri:/clients/7", "_route:client")
	later.StoredAt = time.Now().Add(time.Second) // a request after the recreation
	if err := r.Set(ctx, "GET svc/clients/7?fields=a", later); err != nil {
		t.Fatal(err)
	}
	r.flush(t)
	if e, ok := r.mustGet(t, "GET svc/clients/7?fields=a"); !ok || string(e.Body) != "v1" {
		t.Fatalf("a fill after the recreation: ok=%v, want v1", ok)
	}
}

// A Redis that never evicted lost no raised epoch to eviction: a new tag's
// key comes back at 0, so the concurrent first fills of a new tag all
// count, whichever lands first (route s's stale_if_error copies, stored
// by a list and a read at once, must both be held in L2).
func TestNewTagKeepsConcurrentFirstFills(t *testing.T) {
	srv := redistest.Start(t)
	r := newReplica(t, []string{srv.Addr()})
	ctx := context.Background()
	newer := entry("newer", time.Hour, "s:1")
	older := entry("older", time.Hour, "s:1")
	older.StoredAt = newer.StoredAt.Add(-time.Second)
	if err := r.Set(ctx, "newer", newer); err != nil {
		t.Fatal(err)
	}
	r.flush(t)
	if err := r.Set(ctx, "older", older); err != nil {
		t.Fatal(err)
	}
	r.flush(t)
	for _, k := range []string{"newer", "older"} {
		if _, ok := r.mustGet(t, k); !ok {
			t.Errorf("%s: miss", k)
		}
	}
}

// makeEvict fills Redis until it has evicted a key, then lifts maxmemory
// so that it evicts nothing more: INFO stats evicted_keys stays above 0.
func makeEvict(t testing.TB, rc *redis.Client) {
	t.Helper()
	ctx := context.Background()
	junk := strings.Repeat("x", 64<<10)
	for i := 0; evicted(t, rc) == 0; i++ {
		if i > 10000 {
			t.Fatal("Redis never evicted")
		}
		if err := rc.Set(ctx, fmt.Sprintf("junk:%d", i), junk, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rc.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
}

// On a Redis that has evicted keys, a missing epoch key may be one a write
// raised while a fill was in flight: the fill's request left before the
// write, and it lands after the eviction. Recreated below that fill, the
// stale answer would be current; recreated at Redis's clock, it is a miss,
// and a fill whose request left after the recreation is kept.
func TestEvictingRedisRefusesFillAcrossLostEpoch(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru")
	r := newReplica(t, []string{srv.Addr()})
	rc := raw(t, srv.Addr())
	ctx := context.Background()

	makeEvict(t, rc)

	inflight := time.Now().Add(-time.Second) // its request left before the write
	if err := r.InvalidateTags(ctx, "client:8"); err != nil {
		t.Fatal(err)
	}
	if n := rc.Del(ctx, r.epochKey("client:8")).Val(); n != 1 {
		t.Fatalf("DEL = %d, want 1", n)
	}
	stale := entry("v0", time.Hour, "client:8")
	stale.StoredAt = inflight
	if err := r.Set(ctx, "GET svc/clients/8", stale); err != nil {
		t.Fatal(err)
	}
	r.flush(t)
	if _, ok := r.mustGet(t, "GET svc/clients/8"); ok {
		t.Fatal("a fill in flight across the write is served after its epoch was evicted")
	}

	// A later fill (its request after the recreation; a clock a second
	// ahead stands for "later" without waiting) is kept.
	later := entry("v1", time.Hour, "client:8")
	later.StoredAt = time.Now().Add(time.Second)
	if err := r.Set(ctx, "GET svc/clients/8", later); err != nil {
		t.Fatal(err)
	}
	r.flush(t)
	if e, ok := r.mustGet(t, "GET svc/clients/8"); !ok || string(e.Body) != "v1" {
		t.Fatalf("later fill: ok=%v, want v1", ok)
	}
}

// evicted is Redis's INFO stats evicted_keys.
func evicted(t testing.TB, rc *redis.Client) int {
	t.Helper()
	info, err := rc.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "evicted_keys:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no evicted_keys in INFO stats")
	return 0
}
