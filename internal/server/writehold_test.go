package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/redistest"
)

// epoch reads a tag's epoch in Redis (0 when it was never raised).
func epoch(t *testing.T, rc *redis.Client, tag string) int64 {
	t.Helper()
	v, err := rc.Get(context.Background(), "sidecache:v:"+tag).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return v
}

func holdConfig(o *origin, addr, hold string) string {
	return fmt.Sprintf(baseConfig, o.URL, l2Block(false, addr)) + "coherence:\n  write_hold: " + hold + "\n"
}

// TestWriteHeldUntilInvalidationPublished: Redis refuses writes (PUBLISH
// and the epoch script included) for a while; the writer's answer waits
// until its invalidation is published, so the epoch is raised by the time
// the client has its 200. Before write_hold, the answer went out after the
// first attempt's timeout, the epoch still old, and peers kept the old
// version until a replay a second or more later.
func TestWriteHeldUntilInvalidationPublished(t *testing.T) {
	rs := redistest.Start(t)
	o := newOrigin(t)
	a := startReplicaYAML(t, holdConfig(o, rs.Addr(), "1m"))
	rc := rawClient(t, rs.Addr())
	a.get(t, "/clients/1")
	before := epoch(t, rc, "client:1")

	if err := rc.Do(context.Background(), "CLIENT", "PAUSE", "1500", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := a.do(t, http.MethodPatch, "/clients/1"); code != http.StatusOK {
		t.Fatalf("PATCH: %d", code)
	}
	if after := epoch(t, rc, "client:1"); after <= before {
		t.Fatalf("write answered with the tag's epoch still %d: its invalidation was not published", after)
	}
	if n := metric(t, a, "sidecache_invalidations_late_total"); n != 0 {
		t.Fatalf("sidecache_invalidations_late_total = %v, want 0", n)
	}
}

// TestWriteAnsweredLateIsCounted: past write_hold the answer goes out
// (Redis may be gone for minutes) and is counted; the replay still
// publishes the invalidation once Redis takes writes again.
func TestWriteAnsweredLateIsCounted(t *testing.T) {
	rs := redistest.Start(t)
	o := newOrigin(t)
	a := startReplicaYAML(t, holdConfig(o, rs.Addr(), "300ms"))
	rc := rawClient(t, rs.Addr())
	a.get(t, "/clients/1")
	before := epoch(t, rc, "client:1")

	ctx := context.Background()
	if err := rc.Do(ctx, "CLIENT", "PAUSE", "60000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.Do(context.Background(), "CLIENT", "UNPAUSE").Err() })
	if code, _, _ := a.do(t, http.MethodPatch, "/clients/1"); code != http.StatusOK {
		t.Fatalf("PATCH: %d", code)
	}
	// The PATCH invalidates its route's tags and its URI: one or both
	// may be late, depending on whether the second came after the hold.
	if n := metric(t, a, "sidecache_invalidations_late_total"); n < 1 {
		t.Fatalf("sidecache_invalidations_late_total = %v, want the write counted", n)
	}
	if err := rc.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "replayed", func() bool { return epoch(t, rc, "client:1") > before })
}
