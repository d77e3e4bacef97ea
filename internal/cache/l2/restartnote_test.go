package l2

import (
	"context"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// A purge of everything sweeps the keys under the prefix but the epoch
// keys. It swept Redis's note of the instance its epochs were written on
// (P run, restart.go) too, so a read replica promoted afterwards
// (failover) held no note, and a process started on it took the no-note
// floor, the promoted instance's own start, which was long before the
// failover: it trusted the epochs the failover may have lost
// (docs/coherence.md, "When Redis loses epochs"). Found by the invariant
// harness's redis-restart row: after the seeds' purges of everything, a
// replica started after a snapshot restart had the no-note floor.
func TestPurgeAllKeepsRestartNote(t *testing.T) {
	master := redistest.Start(t, redistest.NoSyncDelay()...)
	follower := redistest.StartReplica(t, master.Addr())
	ctx := context.Background()
	a := newReplica(t, []string{master.Addr()}) // writes the note
	if _, err := a.PurgeAll(ctx, "_route:r"); err != nil {
		t.Fatal(err)
	}
	if err := raw(t, master.Addr()).Do(ctx, "WAIT", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	before := time.Now() // after the follower started: its own start is earlier
	if err := raw(t, follower.Addr()).Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	b := newReplica(t, []string{follower.Addr()})
	if f := b.Floor(); f.Before(before) {
		t.Fatalf("a replica started on the promoted follower after a purge of everything has floor %v, before the failover at %v: the purge swept the note", f, before)
	}
}
