package l2

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// The cluster-wide hit-for-pass mark (passMark): a holder whose answer
// may not be stored releases its lease with pass > 0. Its waiter stops
// at once with a plain miss (not a lapse, which would take the lease
// over); the next miss gets no lease and ErrHitForPass, at once, without
// a wait; that miss's release with pass > 0 (private again) does not
// extend the mark, the bound the holder set; its release(0) (an answer
// stored) clears it, and the key leases again. A pass release from a
// former holder, whose lease another replica took over, leaves the new
// holder's lease alone.
func TestLeaseHitForPass(t *testing.T) {
	srv := redistest.Start(t)
	holder := newReplica(t, []string{srv.Addr()})
	other := newReplica(t, []string{srv.Addr()})
	rc := raw(t, srv.Addr())
	ctx := context.Background()
	const pass = time.Minute

	release, ok, _, err := holder.Lease(ctx, "k", 5*time.Second)
	if err != nil || !ok {
		t.Fatalf("Lease = %v, %v", ok, err)
	}
	release(pass)
	release(0) // the first call counts
	holder.flush(t)
	if v, _ := rc.Get(ctx, "test:l:k").Result(); v != passMark {
		t.Fatalf("after a pass release the lease key holds %q, want %q", v, passMark)
	}
	if ttl, _ := rc.PTTL(ctx, "test:l:k").Result(); ttl <= 0 || ttl > pass {
		t.Fatalf("the mark's PTTL is %s, want within (0, %s]", ttl, pass)
	}
	e, found, lapsed, err := other.WaitFill(ctx, "k", time.Hour, time.Time{})
	if err != nil || found || lapsed {
		t.Fatalf("WaitFill under the mark = %v, found %v, lapsed %v, %v; want a plain miss", e, found, lapsed, err)
	}

	unpass, ok, _, err := other.Lease(ctx, "k", 5*time.Second)
	if ok || !errors.Is(err, ErrHitForPass) {
		t.Fatalf("Lease under the mark = %v, %v; want no lease, ErrHitForPass", ok, err)
	}
	if err := rc.PExpire(ctx, "test:l:k", 30*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	unpass(pass) // not stored again: the mark keeps its own bound
	other.flush(t)
	if ttl, _ := rc.PTTL(ctx, "test:l:k").Result(); ttl > 30*time.Second {
		t.Fatalf("a pass release under the mark extended it to %s", ttl)
	}
	unpass, _, _, err = other.Lease(ctx, "k", 5*time.Second)
	if !errors.Is(err, ErrHitForPass) {
		t.Fatalf("Lease under the mark = %v, want ErrHitForPass", err)
	}
	unpass(0) // an answer stored: the mark ends
	other.flush(t)
	if n, _ := rc.Exists(ctx, "test:l:k").Result(); n != 0 {
		t.Fatal("a stored answer's release left the mark")
	}
	if _, ok, _, err := other.Lease(ctx, "k", 5*time.Second); err != nil || !ok {
		t.Fatalf("Lease after the mark cleared = %v, %v; want the lease", ok, err)
	}

	// A former holder's pass release and a stale clear leave the current
	// holder's lease alone.
	old, ok, _, err := holder.Lease(ctx, "k2", 30*time.Millisecond)
	if err != nil || !ok {
		t.Fatalf("Lease = %v, %v", ok, err)
	}
	if err := rc.Del(ctx, "test:l:k2").Err(); err != nil { // lapsed
		t.Fatal(err)
	}
	cur, ok, _, err := other.Lease(ctx, "k2", 5*time.Second)
	if err != nil || !ok {
		t.Fatalf("takeover Lease = %v, %v", ok, err)
	}
	defer cur(0)
	token, _ := rc.Get(ctx, "test:l:k2").Result()
	old(pass)
	holder.flush(t)
	if err := holder.enqueue(op{kind: opUnpass, key: "k2"}); err != nil {
		t.Fatal(err)
	}
	holder.flush(t)
	if v, _ := rc.Get(ctx, "test:l:k2").Result(); v != token {
		t.Fatalf("a former holder's pass release made the lease %q, want the holder's %q", v, token)
	}
}
