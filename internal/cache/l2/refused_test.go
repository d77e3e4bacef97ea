package l2

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/redistest"
)

// Redis over maxmemory under noeviction refuses a plain script's SET
// ("OOM command not allowed"): the raise runs flagged allow-oom and lands,
// while stores stay refused (nothing half-written: neither the entry nor
// an epoch key at 0). On f93bcf7 the raise failed and the entry the write
// replaced stayed readable.
func TestRaiseLandsOverMaxmemory(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory-policy", "noeviction")
	r := newReplica(t, []string{srv.Addr()})
	ctx := context.Background()
	if err := r.Set(ctx, "k", entry("v0", time.Minute, "t")); err != nil {
		t.Fatal(err)
	}
	r.flush(t)
	rc := raw(t, srv.Addr())
	if err := rc.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.ConfigSet(context.Background(), "maxmemory", "0").Err() })
	if err := r.InvalidateTags(ctx, "t", "new"); err != nil {
		t.Fatalf("invalidation over maxmemory: %v", err)
	}
	if _, ok := r.mustGet(t, "k"); ok {
		t.Error("the invalidated entry is still read over maxmemory")
	}
	if n := r.Refusals(); n != 0 {
		t.Errorf("%d refusals counted for raises that landed", n)
	}
	if err := r.Set(ctx, "k2", entry("v", time.Minute, "fresh")); err != nil {
		t.Fatal(err)
	}
	r.flush(t)
	if n := rc.Exists(ctx, "test:e:k2", "test:v:fresh").Val(); n != 0 {
		t.Errorf("%d keys of a store made over maxmemory were written", n)
	}
}

// A raise Redis refuses while it answers (here an ACL without write access
// to the epoch keys) sets the floor at once here, on the peers through a
// Lost message, and in Redis's note for replicas started later.
func TestRefusedRaiseSetsFloorEverywhere(t *testing.T) {
	srv, a, b, rc := refusingEpochs(t)
	ctx := context.Background()
	before := time.Now()
	if err := a.InvalidateTags(ctx, "t"); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("invalidation: %v, want NOPERM", err)
	}
	if a.Refusals() != 1 {
		t.Errorf("refusals = %d, want 1", a.Refusals())
	}
	if f := a.Floor(); f.Before(before) {
		t.Errorf("writer's floor %v, before the refusal", f)
	}
	b.awaitTag(t, 5*time.Second, "t", func(Invalidation) bool { return true }) // the write's own message
	if inv := b.nextInvalidation(t, 5*time.Second); !inv.All || !inv.Gap {
		t.Fatalf("peer got %+v, want the floor notice", inv)
	}
	if f := b.Floor(); f.Before(before) {
		t.Errorf("peer's floor %v, before the refusal", f)
	}
	note, err := rc.Get(ctx, "test:run").Result()
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := strconv.ParseInt(note[strings.IndexByte(note, ' ')+1:], 10, 64)
	if time.UnixMilli(ms).Before(before.Add(-time.Second)) {
		t.Errorf("note %q: floor before the refusal", note)
	}
	c := newReplica(t, []string{srv.Addr()})
	if f := c.Floor(); f.Before(before.Add(-time.Second)) {
		t.Errorf("replica started later: floor %v, before the refusal", f)
	}
}

// TestOwnAndPeerRefusalsBothLogged: a replica's own refused raise and a
// peer's, within the warnings' window, are two warnings: before, one
// limiter served both, and the peer's was left out.
func TestOwnAndPeerRefusalsBothLogged(t *testing.T) {
	_, a, b, _ := refusingEpochs(t)
	ctx := context.Background()
	if err := a.InvalidateTags(ctx, "t"); err == nil {
		t.Fatal("a's raise was not refused")
	}
	b.awaitTag(t, 5*time.Second, "t", func(Invalidation) bool { return true })
	if inv := b.nextInvalidation(t, 5*time.Second); !inv.All || !inv.Gap {
		t.Fatalf("b got %+v, want a's floor notice", inv)
	}
	if err := b.InvalidateTags(ctx, "u"); err == nil {
		t.Fatal("b's raise was not refused")
	}
	a.awaitTag(t, 5*time.Second, "u", func(Invalidation) bool { return true })
	if inv := a.nextInvalidation(t, 5*time.Second); !inv.All || !inv.Gap {
		t.Fatalf("a got %+v, want b's floor notice", inv)
	}
	logs := a.logs.String()
	for _, want := range []string{"redis refused to raise a write's epoch", "a peer's epoch raise was refused"} {
		if !strings.Contains(logs, want) {
			t.Errorf("a's log lacks %q:\n%s", want, logs)
		}
	}
}

// refusingEpochs starts a Redis that answers but refuses every write to
// the epoch keys (an ACL without write access to them), two replicas on
// it, and a raw client.
func refusingEpochs(t *testing.T) (*redistest.Server, *replica, *replica, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	a := newReplica(t, []string{srv.Addr()})
	b := newReplica(t, []string{srv.Addr()})
	rc := raw(t, srv.Addr())
	if err := rc.Do(context.Background(), "ACL", "SETUSER", "default", "resetkeys", "%R~*", "~test:e:*", "~test:l:*", "~test:run").Err(); err != nil {
		t.Fatal(err)
	}
	return srv, a, b, rc
}

// A replay Redis refuses again is told to the fleet again only once no
// Lost published after its tags were queued is younger than MaxLag/2: a
// Redis refusing every write for as long as a disk stays full keeps the
// replay's tags (internal/server), and a Lost from every replica holding
// some at every replay would be O(replicas²) deliveries. A write's own
// refusal, and a replay of tags queued after the last Lost, are told at
// once. B hears, in the order A published: t, Lost, t ×5 (replays covered
// by that Lost), u, Lost (tags queued after it); go-redis sends a pipeline
// Redis answered NOREPLICAS once more, so each may come twice in a row.
func TestReplayedRefusalRetoldOnlyWhenNotCovered(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv.Addr())
	ctx := context.Background()
	slow := func(o *Options) { o.MaxLag = 10 * time.Second }
	a := newReplica(t, []string{srv.Addr()}, slow)
	b := newReplica(t, []string{srv.Addr()}, slow)
	if err := rc.ConfigSet(ctx, "min-replicas-to-write", "1").Err(); err != nil {
		t.Fatal(err)
	}
	queued := time.Now()
	if err := a.InvalidateTags(ctx, "t"); err == nil || !WritesRefused(err) {
		t.Fatalf("invalidation: %v, want a refusal of every write", err)
	}
	for range 5 {
		if err := a.ReplayTags(ctx, queued, "t"); err == nil {
			t.Fatal("replay taken by a Redis refusing writes")
		}
	}
	if err := a.ReplayTags(ctx, time.Now(), "u"); err == nil {
		t.Fatal("replay taken by a Redis refusing writes")
	}
	var got []string
	for len(got) == 0 || got[len(got)-1] != "lost" || !slices.Contains(got, "u") {
		switch inv := b.nextInvalidation(t, 10*time.Second); {
		case inv.All && inv.Gap:
			got = append(got, "lost")
		default:
			got = append(got, strings.Join(inv.Tags, ","))
		}
	}
	got = slices.Compact(got)
	want := []string{"t", "lost", "t", "u", "lost"}
	if !slices.Equal(got, want) {
		t.Errorf("B heard %v, want %v", got, want)
	}
	if err := rc.ConfigSet(ctx, "min-replicas-to-write", "0").Err(); err != nil {
		t.Fatal(err)
	}
}
