package l2

import (
	"context"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// Redis restarts from a snapshot taken before an acknowledged write: the
// entry that write invalidated is back with its tag's epoch as it was. A
// replica running through the restart sets its floor (a gap); a process
// started afterwards must set it too (probe E3: a new pod served 10/10
// pre-write versions, /readyz "proven", no floor), and later ones the
// same floor.
func TestNewReplicaAfterSnapshotRestartGetsFloor(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv.Addr())
	ctx := context.Background()

	r1 := newReplica(t, []string{srv.Addr()})
	if f := r1.Floor(); f.After(time.Now()) {
		t.Fatalf("floor %v of a replica on a Redis that did not restart is after now", f)
	}
	old := entry("v0", time.Hour, "client:9")
	old.StoredAt = time.Now().Add(-time.Second)
	if err := r1.Set(ctx, "GET svc/clients/9", old); err != nil {
		t.Fatal(err)
	}
	r1.flush(t)
	if err := rc.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r1.InvalidateTags(ctx, "client:9"); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	srv.Restart() // SIGKILL: the raise is lost, the snapshot is loaded

	r2 := newReplica(t, []string{srv.Addr()})
	if _, ok := r2.mustGet(t, "GET svc/clients/9"); !ok {
		t.Fatal("setup: the snapshot did not bring the invalidated entry back")
	}
	f := r2.Floor()
	if f.Before(restarted) || !old.StoredAt.Before(f) {
		t.Fatalf("a replica started after the restart has floor %v, before the restart at %v: it trusts the rolled-back epochs", f, restarted)
	}
	r3 := newReplica(t, []string{srv.Addr()})
	if !r3.Floor().Equal(f) {
		t.Fatalf("a later replica's floor %v, want the noted %v", r3.Floor(), f)
	}
}

// TestNoNoteFloorIsAtMostASecondEarly: on a Redis without the note (its
// data predates it, or it was evicted), a replica's floor is when the
// instance started, read from uptime_in_seconds, whole seconds between
// two truncated clocks: never more than a second before the restart.
// Subtracting a second more put it up to two seconds early, depending on
// where in its second Redis started and was asked, so the replica
// trusted entries fetched in the seconds before the restart (and the
// harness's redis-restart row saw no floor from the restart). The
// restarts below are asked at offsets a tenth of a second apart over
// 1.2 s, so some fall in each part of the second.
func TestNoNoteFloorIsAtMostASecondEarly(t *testing.T) {
	srv := redistest.Start(t)
	for i := range 13 {
		restarted := time.Now()
		srv.Restart()
		time.Sleep(time.Duration(i) * 97 * time.Millisecond)
		r := newReplica(t, []string{srv.Addr()})
		if f := r.Floor(); f.Before(restarted.Add(-time.Second)) {
			t.Fatalf("restart %d: floor %v is %v before the restart at %v, want at most a second", i, f, restarted.Sub(f), restarted)
		}
		_ = r.Close()
	}
}
