package l2

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/redistest"
)

// lagged gives a replica heartbeats: every lag/4, proven after 3/4 lag.
func lagged(lag time.Duration) func(*Options) {
	return func(o *Options) { o.MaxLag = lag }
}

// waitProven returns once r's own heartbeats have proven its channel.
func waitProven(t *testing.T, r *replica) time.Time {
	t.Helper()
	var p time.Time
	eventually(t, 10*time.Second, func() error {
		if p = r.Proven(); p.IsZero() {
			return errNotYet
		}
		return nil
	})
	return p
}

var errNotYet = errors.New("not proven yet")

// TestReplicaHearsNoPeerBeats: a replica's heartbeats reach only itself.
// On the shared channel every replica received every peer's 4 beats a
// second, 4·N² deliveries for the fleet; a plain subscriber to the shared
// channel (what every replica is) must now see invalidations only.
func TestReplicaHearsNoPeerBeats(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv.Addr())
	ctx := context.Background()
	sub := rc.Subscribe(ctx, "test:invalidate")
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(ctx); err != nil { // the subscribe confirmation
		t.Fatal(err)
	}

	lag := 200 * time.Millisecond
	a := newReplica(t, []string{srv.Addr()}, lagged(lag))
	b := newReplica(t, []string{srv.Addr()}, lagged(lag))
	waitProven(t, a)
	waitProven(t, b)
	if err := a.InvalidateTags(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	// Redis delivers in the order it ran the PUBLISHes: everything the
	// replicas published before the marker is read before it.
	if err := rc.Publish(ctx, "test:invalidate", `{"origin":"marker"}`).Err(); err != nil {
		t.Fatal(err)
	}
	beats, invs := 0, 0
	for {
		m, err := sub.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(m.Payload, "marker") {
			break
		}
		if strings.Contains(m.Payload, `"beat"`) {
			beats++
		} else {
			invs++
		}
	}
	if beats != 0 || invs != 1 {
		t.Fatalf("shared channel carried %d beats and %d invalidations; want 0 and 1", beats, invs)
	}
	// The peer hears it. On a loaded machine a gap notice may come first
	// (its own beats came back later than max_lag allows), and the
	// invalidation may have been lost in that gap, which the notice
	// covers by purging everything: then ask again, until the peer hears
	// one of t. Anything else fails.
	for try := 0; ; try++ {
		inv := b.nextInvalidation(t, 5*time.Second)
		if inv.Beat == nil && len(inv.Tags) == 1 && inv.Tags[0] == "t" {
			break
		}
		if !inv.Gap || try == 5 {
			t.Fatalf("peer got %+v, want the invalidation of t", inv)
		}
		if err := a.InvalidateTags(ctx, "t"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOwnBeatsStopWhilePeersFlow cuts only the direction from replica B to
// Redis: B still receives everything published on the shared channel (a
// peer's invalidations, the beats of peers of the previous release, which
// beat there), but its own beats no longer reach Redis. B's proof must stop
// where it was, and its L1 entries older than max_lag stop being served:
// the property the shared channel gave (only a replica's own beats count)
// survives beats on a channel of its own.
func TestOwnBeatsStopWhilePeersFlow(t *testing.T) {
	srv := redistest.Start(t)
	up := startRelay(t, srv.Addr())
	lag := 400 * time.Millisecond
	a := newReplica(t, []string{srv.Addr()}, lagged(lag))
	b := newReplica(t, []string{up.addr()}, lagged(lag))
	waitProven(t, b)
	ctx := context.Background()

	up.holdUp()
	if err := a.InvalidateTags(ctx, "x1"); err != nil {
		t.Fatal(err)
	}
	if inv := b.nextInvalidation(t, 10*time.Second); len(inv.Tags) != 1 || inv.Tags[0] != "x1" {
		t.Fatalf("peer got %+v, want x1", inv)
	}
	// Every beat of B's that Redis ran was run before x1 was published,
	// so B has heard all it will hear of its own: the proof stands here.
	p0 := b.Proven()

	rc := raw(t, srv.Addr())
	for seq := 1; seq <= 20; seq++ {
		beat := `{"origin":"oldpeer","beat":{"seq":` + strconv.Itoa(seq) + `,"sent":` + strconv.Itoa(int(time.Now().UnixNano())) + `}}`
		if err := rc.Publish(ctx, "test:invalidate", beat).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.InvalidateTags(ctx, "x2"); err != nil {
		t.Fatal(err)
	}
	if inv := b.nextInvalidation(t, 10*time.Second); len(inv.Tags) != 1 || inv.Tags[0] != "x2" {
		t.Fatalf("peer got %+v, want x2 (peers' beats are not delivered)", inv)
	}
	if p := b.Proven(); !p.Equal(p0) {
		t.Fatalf("proof moved from %s to %s while B's own beats could not reach Redis", p0, p)
	}

	// What the tiers make of it, on a clock set relative to the proof.
	// Atomic: the L1 reads its clock from its expiry sweep's goroutine too.
	var now atomic.Pointer[time.Time]
	set := func(t time.Time) { now.Store(&t) }
	clock := func() time.Time { return *now.Load() }
	set(p0)
	l1s, err := l1.New(l1.Options{MaxBytes: 1 << 20, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l1s.Close)
	tiers := cache.NewTiered(l1s, nil, cache.TieredOptions{Now: clock, MaxLag: lag, Proven: b.Proven})
	e := entry("v", time.Hour)
	e.StoredAt = p0.Add(-lag)
	if err := l1s.Set(ctx, "k", e); err != nil {
		t.Fatal(err)
	}
	l1s.Wait()
	set(p0.Add(lag / 2))
	if got, _, _ := tiers.Lookup(ctx, "k"); got == nil {
		t.Fatal("entry not served while the proof is within max_lag")
	}
	set(p0.Add(lag + time.Millisecond))
	if got, _, _ := tiers.Lookup(ctx, "k"); got != nil {
		t.Fatal("entry older than max_lag served once B's own beats stopped")
	}
}
