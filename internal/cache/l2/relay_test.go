package l2

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/redistest"
)

// onRelays subscribes a replica on the read replicas at addrs.
func onRelays(addrs ...string) func(*Options) {
	return func(o *Options) { o.SubscribeAddrs = addrs }
}

// publishes is how many PUBLISH commands the server at addr has run.
func publishes(t *testing.T, addr string) int {
	t.Helper()
	info, err := raw(t, addr).Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_publish:calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

// subscribers is how many connections of the server at addr subscribe to
// the invalidation channel.
func subscribers(t *testing.T, addr string) int64 {
	t.Helper()
	n, err := raw(t, addr).PubSubNumSub(context.Background(), "test:invalidate").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n["test:invalidate"]
}

// waitBeatsPublished returns once the master has run n more of the
// relayed replica's beats than it had at base (the writer does not beat).
func waitBeatsPublished(t *testing.T, addr string, base, n int) {
	t.Helper()
	eventually(t, 10*time.Second, func() error {
		if got := publishes(t, addr) - base; got < n {
			return fmt.Errorf("%d beats published, want %d", got, n)
		}
		return nil
	})
}

// provenAtDelivery wraps OnInvalidate to record, for each invalidation, the
// replica's proof at the moment the subscriber delivered it.
type provenAtDelivery struct {
	store atomic.Pointer[Store]
	mu    sync.Mutex
	at    map[string]time.Time // first tag → Proven() when delivered
}

func (p *provenAtDelivery) tune(o *Options) {
	p.at = map[string]time.Time{}
	next := o.OnInvalidate
	o.OnInvalidate = func(inv Invalidation) {
		if s := p.store.Load(); s != nil && len(inv.Tags) > 0 {
			p.mu.Lock()
			p.at[inv.Tags[0]] = s.Proven()
			p.mu.Unlock()
		}
		next(inv)
	}
}

func (p *provenAtDelivery) get(tag string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.at[tag]
}

// TestRelayProofWaitsForReplication puts replica A's subscription on a
// read replica R of the master M, with R's replication link through a TCP
// relay the test can hold, and W, a writer, on M. While the link is held,
// W's invalidation is taken by M and A's later beats are taken by M too,
// but none reaches A through R: A's proof must not reach the
// invalidation's time. Once released, the invalidation is delivered before
// any of those beats (A's proof at its delivery is still older than it),
// and then the proof passes it. This is the claim the relay tier rests on:
// a PUBLISH on the master reaches a read replica's subscribers in the
// master's order, and a lagging read replica delays the proof instead of
// running it ahead.
func TestRelayProofWaitsForReplication(t *testing.T) {
	m := redistest.Start(t, redistest.NoSyncDelay()...)
	link := startRelay(t, m.Addr())
	r := redistest.StartReplica(t, link.addr())
	lag := 400 * time.Millisecond
	w := newReplica(t, []string{m.Addr()})
	var seen provenAtDelivery
	a := newReplica(t, []string{m.Addr()}, lagged(lag), onRelays(r.Addr()), seen.tune)
	seen.store.Store(a.Store)
	if got, want := [2]int64{subscribers(t, m.Addr()), subscribers(t, r.Addr())}, [2]int64{1, 1}; got != want {
		t.Fatalf("subscribers on master, read replica = %v, want %v (the writer on the master, A on the read replica)", got, want)
	}
	waitProven(t, a)

	ctx := context.Background()
	link.hold()
	base := publishes(t, m.Addr())
	if err := w.InvalidateTags(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	taken := time.Now() // M ran the PUBLISH of x before this
	waitBeatsPublished(t, m.Addr(), base+1, 4)
	if p := a.Proven(); !p.Before(taken) {
		t.Fatalf("proof %s reached the held invalidation (%s) while the read replica could not receive it", p, taken)
	}
	select {
	case inv := <-a.inv:
		t.Fatalf("A got %+v while the read replica's link was held; A's log:\n%s", inv, a.logs)
	default:
	}

	link.release()
	if inv := a.nextInvalidation(t, 10*time.Second); len(inv.Tags) != 1 || inv.Tags[0] != "x" {
		t.Fatalf("A got %+v, want x", inv)
	}
	if p := seen.get("x"); !p.Before(taken) {
		t.Fatalf("at x's delivery A's proof was %s, past x (%s): a beat overtook it", p, taken)
	}
	eventually(t, 10*time.Second, func() error {
		if p := a.Proven(); p.Before(taken) {
			return fmt.Errorf("proof %s, still before x", p)
		}
		return nil
	})
}

// TestRelayCutStopsProofAndResyncSetsFloor cuts the read replica R from the
// master (REPLICAOF NO ONE on R: it keeps A's subscription and answers its
// PINGs, but receives nothing the master runs). W's invalidation of x is
// lost for A, and A's beats stop coming back: the proof stops, and A's L1
// entries older than max_lag stop being served. R then replicates the
// master again with a full resync (it was a master meanwhile, so a partial
// one is refused), which does not close A's connection: beats come back
// and the proof resumes, but x never arrives. A must notice, from its own
// beats that the master took and that never came back, and set the floor,
// so an entry fetched before x is still refused once it is older than
// max_lag.
func TestRelayCutStopsProofAndResyncSetsFloor(t *testing.T) {
	m := redistest.Start(t, redistest.NoSyncDelay()...)
	r := redistest.StartReplica(t, m.Addr())
	lag := 400 * time.Millisecond
	w := newReplica(t, []string{m.Addr()})
	a := newReplica(t, []string{m.Addr()}, lagged(lag), onRelays(r.Addr()))
	waitProven(t, a)
	ctx := context.Background()
	rc := raw(t, r.Addr())

	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	base := publishes(t, m.Addr())
	stored := time.Now() // an entry fetched before x
	if err := w.InvalidateTags(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	taken := time.Now()
	waitBeatsPublished(t, m.Addr(), base+1, 4)
	p0 := a.Proven()
	if !p0.Before(taken) {
		t.Fatalf("proof %s reached x (%s) on a read replica cut from the master", p0, taken)
	}

	// What the tiers make of it, on a clock set relative to the proof.
	var now atomic.Pointer[time.Time]
	set := func(t time.Time) { now.Store(&t) }
	clock := func() time.Time { return *now.Load() }
	set(p0)
	l1s, err := l1.New(l1.Options{MaxBytes: 1 << 20, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	tiers := cache.NewTiered(l1s, nil, cache.TieredOptions{Now: clock, MaxLag: lag, Proven: a.Proven, Floor: a.Floor})
	e := entry("v", time.Hour, "x")
	e.StoredAt = stored
	if err := l1s.Set(ctx, "k", e); err != nil {
		t.Fatal(err)
	}
	l1s.Wait()
	set(stored.Add(lag + time.Millisecond)) // p0 is older: beats stopped before stored
	if got, _, _ := tiers.Lookup(ctx, "k"); got != nil {
		t.Fatal("entry older than max_lag served while the read replica was cut from the master")
	}

	host, port, _ := net.SplitHostPort(m.Addr())
	if err := rc.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	r.WaitSynced(t)
	resynced := time.Now()
	eventually(t, 10*time.Second, func() error {
		if p := a.Proven(); p.Before(resynced) {
			return fmt.Errorf("proof %s, not yet past the resync at %s", p, resynced)
		}
		return nil
	})
	for {
		inv := a.nextInvalidation(t, 5*time.Second)
		if len(inv.Tags) > 0 {
			t.Fatalf("A got %+v: the full resync was expected to lose x", inv)
		}
		if inv.Gap {
			break
		}
	}
	if f := a.Floor(); !f.After(taken) {
		t.Fatalf("floor %s not past x (%s) after own beats were lost in the resync", f, taken)
	}
	// A fresh proof, an entry older than max_lag: only the floor refuses it.
	set(a.Proven())
	if stale := stored.Add(lag + time.Millisecond); now.Load().Before(stale) {
		set(stale)
	}
	noFloor := cache.NewTiered(l1s, nil, cache.TieredOptions{Now: clock, MaxLag: lag, Proven: a.Proven})
	if got, _, _ := noFloor.Lookup(ctx, "k"); got == nil {
		t.Fatal("test premise: the proof does not cover the entry")
	}
	if got, _, _ := tiers.Lookup(ctx, "k"); got != nil {
		t.Fatal("entry fetched before x served on a fresh proof that skipped x")
	}
}

// TestRelayFailover kills the read replica that replica A subscribed on: A
// moves to the next one in SubscribeAddrs, and its beats prove its channel
// again there.
func TestRelayFailover(t *testing.T) {
	m := redistest.Start(t, redistest.NoSyncDelay()...)
	rs := []*redistest.Server{redistest.StartReplica(t, m.Addr()), redistest.StartReplica(t, m.Addr())}
	lag := 400 * time.Millisecond
	w := newReplica(t, []string{m.Addr()})
	a := newReplica(t, []string{m.Addr()}, lagged(lag), onRelays(rs[0].Addr(), rs[1].Addr()))
	waitProven(t, a)

	first := rs[0]
	other := rs[1]
	if subscribers(t, first.Addr()) == 0 {
		first, other = other, first
	}
	if n := subscribers(t, first.Addr()); n != 1 {
		t.Fatalf("%d subscribers on A's read replica, want 1", n)
	}
	first.Kill()
	eventually(t, 20*time.Second, func() error {
		if n := subscribers(t, other.Addr()); n != 1 {
			return fmt.Errorf("%d subscribers on the other read replica", n)
		}
		return nil
	})
	moved := time.Now()
	eventually(t, 10*time.Second, func() error {
		if p := a.Proven(); p.Before(moved) {
			return fmt.Errorf("proof %s, not yet past the move at %s", p, moved)
		}
		return nil
	})
	if err := w.InvalidateTags(context.Background(), "y"); err != nil {
		t.Fatal(err)
	}
	a.awaitTag(t, 10*time.Second, "y", func(inv Invalidation) bool { return inv.Gap })
}

// TestRelaySentinelFailover subscribes replica A on the read replica that
// Sentinel manages, then kills the master: the read replica is promoted,
// A's subscription on it stays, A's beats (now published on it, the new
// master) prove its channel again, and a writer's invalidation reaches A.
func TestRelaySentinelFailover(t *testing.T) {
	sn := redistest.StartSentinel(t, "sidecache")
	sentinel := func(o *Options) {
		o.MasterName = sn.Name()
		o.Timeout = time.Second
	}
	lag := 400 * time.Millisecond
	w := newReplica(t, sn.SentinelAddrs(), sentinel)
	a := newReplica(t, sn.SentinelAddrs(), sentinel, lagged(lag), onRelays(sn.Replica().Addr()))
	w.waitUp(t)
	a.waitUp(t)
	waitProven(t, a)
	if got, want := [2]int64{subscribers(t, sn.Master().Addr()), subscribers(t, sn.Replica().Addr())}, [2]int64{1, 1}; got != want {
		t.Fatalf("subscribers on master, read replica = %v, want %v", got, want)
	}

	sn.Master().Kill()
	killed := time.Now()
	eventually(t, 30*time.Second, func() error {
		if addr, err := sn.MasterAddr(); err != nil || addr != sn.Replica().Addr() {
			return fmt.Errorf("master = %q, %v", addr, err)
		}
		return nil
	})
	eventually(t, 30*time.Second, func() error {
		if p := a.Proven(); !p.After(killed) {
			return fmt.Errorf("proof %s, not past the master's death", p)
		}
		return nil
	})
	if n := subscribers(t, sn.Replica().Addr()); n < 1 {
		t.Fatalf("%d subscribers on the promoted read replica, want A's", n)
	}
	ctx := context.Background()
	eventually(t, 15*time.Second, func() error { return w.InvalidateTags(ctx, "z") })
	a.awaitTag(t, 10*time.Second, "z", func(inv Invalidation) bool { return inv.All })
}

// TestRelayRefusedOnCluster: a Cluster forwards PUBLISH to replica nodes
// over the cluster bus, not the replication stream, so New refuses read
// replicas there (config validation says so first).
func TestRelayRefusedOnCluster(t *testing.T) {
	for _, o := range []Options{
		{Addrs: []string{"127.0.0.1:1"}, Cluster: true, SubscribeAddrs: []string{"127.0.0.1:2"}},
		{Addrs: []string{"127.0.0.1:1", "127.0.0.1:3"}, SubscribeAddrs: []string{"127.0.0.1:2"}},
	} {
		if s, err := New(context.Background(), o); err == nil {
			_ = s.Close()
			t.Fatalf("New(%+v) accepted subscribe addrs on a Cluster", o)
		}
	}
}

// TestRelayStalledMovesOn cuts replica A's read replica from the master
// (REPLICAOF NO ONE): its connection works and answers PINGs, but A's
// beats, which the master takes, stop coming back. After relayStall of
// them A moves to the other read replica, and proves its channel there
// (with the floor past the cut, as after any move).
func TestRelayStalledMovesOn(t *testing.T) {
	m := redistest.Start(t, redistest.NoSyncDelay()...)
	rs := []*redistest.Server{redistest.StartReplica(t, m.Addr()), redistest.StartReplica(t, m.Addr())}
	lag := 400 * time.Millisecond
	a := newReplica(t, []string{m.Addr()}, lagged(lag), onRelays(rs[0].Addr(), rs[1].Addr()))
	waitProven(t, a)
	first, other := rs[0], rs[1]
	if subscribers(t, first.Addr()) == 0 {
		first, other = other, first
	}
	if err := raw(t, first.Addr()).Do(context.Background(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	eventually(t, 30*time.Second, func() error {
		if n := subscribers(t, other.Addr()); n != 1 {
			return fmt.Errorf("%d subscribers on the other read replica", n)
		}
		return nil
	})
	if n := subscribers(t, first.Addr()); n != 0 {
		t.Fatalf("%d subscribers left on the cut read replica", n)
	}
	eventually(t, 10*time.Second, func() error {
		if p := a.Proven(); !p.After(cut) {
			return fmt.Errorf("proof %s, not past the cut at %s", p, cut)
		}
		return nil
	})
	if f := a.Floor(); !f.After(cut) {
		t.Fatalf("floor %s not past the cut at %s", f, cut)
	}
}
