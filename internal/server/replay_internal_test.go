package server

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/metrics"
	"github.com/sidecache/sidecache/internal/redistest"
)

// replayFixture is an invalidator on a real Redis that refuses every
// epoch write (an ACL without write access to the epoch keys: "NOPERM")
// while it answers PINGs, so its breaker stays closed: the failure is
// about the tags, not an outage. (It was maxmemory 1 under noeviction,
// "OOM command not allowed", until the raise ran with allow-oom: Redis
// now takes it over maxmemory, TestNoStaleL2HitAfterWriteWhileRedisOutOfMemory.)
func replayFixture(t *testing.T) (*invalidator, *prometheus.Registry, *redistest.Server) {
	t.Helper()
	v, reg, rs, raw := replayOn(t)
	if err := raw.Do(context.Background(), "ACL", "SETUSER", "default", "resetkeys", "%R~*", "~t:e:*", "~t:l:*", "~t:run").Err(); err != nil {
		t.Fatal(err)
	}
	return v, reg, rs
}

// replayOn is an invalidator on a Redis of its own (prefix "t:"), its
// registry, and a raw client to make that Redis misbehave.
func replayOn(t *testing.T) (*invalidator, *prometheus.Registry, *redistest.Server, *redis.Client) {
	t.Helper()
	rs := redistest.Start(t)
	s, err := l2.New(context.Background(), l2.Options{Addrs: []string{rs.Addr()}, Prefix: "t:", Timeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	raw := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	t.Cleanup(func() { _ = raw.Close() })
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.Tiers(false, true) // the replay series exist only with L2
	return newInvalidator(nil, s, 0, m, func() []string { return nil }), reg, rs, raw
}

// Issue 20 item 3: the replay set is de-duplicated, and a tag whose L2
// invalidation keeps failing while Redis answers is given up after
// maxTries replays, counted in sidecache_invalidation_replays_abandoned_total.
// On 16d946c such a tag was replayed every max_lag/8 for ever (with
// 60 KB tags, 58–75 MiB/s of Redis traffic with no client at all).
func TestReplayGivesUpAfterBoundedTries(t *testing.T) {
	v, reg, _ := replayFixture(t)
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	for range 3 { // the same write three times: one pending tag each
		if err := v.InvalidateTags(ctx, "client:1", "client:2"); err == nil {
			t.Fatal("invalidation succeeded against a Redis refusing epoch writes")
		}
	}
	if n := v.pendingCount(); n != 2 {
		t.Fatalf("pending = %d, want 2 (de-duplicated)", n)
	}
	flushes := 0
	for v.pendingCount() > 0 {
		if flushes++; flushes > 100 {
			t.Fatalf("still %d tags pending after %d replays", v.pendingCount(), flushes-1)
		}
		v.flush(ctx, log)
	}
	if flushes != maxTries {
		t.Errorf("gave up after %d replays, want %d", flushes, maxTries)
	}
	if got := value(t, reg, "sidecache_invalidation_replays_abandoned_total"); got != 2 {
		t.Errorf("abandoned = %v, want 2", got)
	}
	if got := value(t, reg, "sidecache_invalidation_replay_pending"); got != 0 {
		t.Errorf("pending gauge = %v, want 0", got)
	}
}

// While Redis is down, replays do not count towards giving up: an outage
// must not drop the invalidations it delayed. Once Redis answers again
// they go through.
func TestReplayKeepsTagsThroughOutage(t *testing.T) {
	v, _, rs := replayFixture(t)
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	_ = v.InvalidateTags(ctx, "client:1")
	rs.Stop()
	for deadline := time.Now().Add(10 * time.Second); v.l2.Up(); {
		if time.Now().After(deadline) {
			t.Fatal("breaker still closed 10s after Redis stopped")
		}
		v.flush(ctx, log) // failures against a dead Redis open the breaker
	}
	for range 3 * maxTries {
		v.flush(ctx, log)
	}
	if n := v.pendingCount(); n != 1 {
		t.Fatalf("pending = %d after replays during an outage, want 1", n)
	}
}

// A Redis that refuses every write while it answers PING and PUBLISH (a
// master short of the replicas min-replicas-to-write asks for:
// NOREPLICAS; a failed snapshot: MISCONF) refuses the raise for what it
// is, not for the tag: the replay keeps the tag, breaker closed or not,
// until Redis takes it. Given up after maxTries, the raise never landed,
// and a pod started afterwards served the entry the write replaced
// (TestNoStaleL2HitAfterWriteWhileRedisRefusesWrites).
func TestReplayKeepsTagsWhileRedisRefusesWrites(t *testing.T) {
	v, reg, _, raw := replayOn(t)
	ctx := context.Background()
	minReplicas := func(n string) {
		t.Helper()
		if err := raw.ConfigSet(ctx, "min-replicas-to-write", n).Err(); err != nil {
			t.Fatal(err)
		}
	}
	minReplicas("1")
	log := slog.New(slog.DiscardHandler)
	if err := v.InvalidateTags(ctx, "client:1"); err == nil || !strings.Contains(err.Error(), "NOREPLICAS") {
		t.Fatalf("invalidation against a Redis short of replicas: %v", err)
	}
	for range 3 * maxTries {
		v.flush(ctx, log)
	}
	if n := v.pendingCount(); n != 1 {
		t.Fatalf("pending = %d after %d replays Redis refused, want 1", n, 3*maxTries)
	}
	if got := value(t, reg, "sidecache_invalidation_replays_abandoned_total"); got != 0 {
		t.Errorf("abandoned = %v, want 0", got)
	}
	minReplicas("0")
	if !v.flush(ctx, log) || v.pendingCount() != 0 {
		t.Fatalf("still %d tags pending once Redis takes writes", v.pendingCount())
	}
	if ep, err := raw.Get(ctx, "t:v:client:1").Int64(); err != nil || ep == 0 {
		t.Errorf("epoch of client:1 = %d, %v: the raise did not land", ep, err)
	}
}

// Past its bounds the replay set stops growing (the next replay purges L2
// as a whole instead).
func TestReplaySetBounded(t *testing.T) {
	v, _, _ := replayFixture(t)
	big := strings.Repeat("x", 1<<20)
	for i := range 40 {
		v.retryLater([]string{fmt.Sprintf("%s%d", big, i)})
	}
	if v.bytes > maxPendingBytes || !v.overflow {
		t.Fatalf("replay set holds %d bytes (bound %d), overflow %v", v.bytes, maxPendingBytes, v.overflow)
	}
}

// value is the sum of the samples of metric family name in reg.
func value(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return v
}
