package mget

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l2/late"
	"github.com/sidecache/sidecache/internal/redistest"
)

// TestLeanOneReadPerMGet: an MGET's reply is read once it is there, with
// the command written in the same poller call (rawio's Ask), not after a
// read that finds nothing yet: one read system call per MGET, at most 1.2
// allowed (the code before made 1.5–2, its first read finding nothing
// unless Redis was quicker than the read: 76–100 for 50 MGETs in 10 runs).
func TestLeanOneReadPerMGet(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("raw calls are Linux's")
	}
	srv := redistest.Start(t)
	ctx := context.Background()
	if err := raw(t, srv.Addr()).Set(ctx, "a", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	p := newLean(t, srv.Addr(), 1)
	if _, err := leanGet(ctx, p, "a", "b"); err != nil { // dials
		t.Fatal(err)
	}
	r0, w0 := p.idle[0].rw.Calls()
	const n = 50
	for range n {
		got, err := leanGet(ctx, p, "a", "b")
		if err != nil {
			t.Fatal(err)
		}
		sameVals(t, "mget", got, "1", nil)
	}
	r, w := p.idle[0].rw.Calls()
	if r-r0 > n+n/5 || w-w0 != n {
		t.Errorf("%d MGETs made %d read and %d write system calls; want one write each and at most 1.2 reads", n, r-r0, w-w0)
	}
}

// TestLeanLateAskUnsent: an MGET whose deadline has passed when its
// command would be written fails as lateness with nothing sent, the
// connection stays pooled, and the next MGET on it gets its own reply.
func TestLeanLateAskUnsent(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	if err := raw(t, srv.Addr()).Set(ctx, "a", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	p := newLean(t, srv.Addr(), 1)
	if _, err := leanGet(ctx, p, "a"); err != nil { // dials
		t.Fatal(err)
	}
	err := p.MGet(ctx, time.Now(), time.Now().Add(-time.Millisecond), [3]string{"b"}, nil, func([][]byte) {
		t.Error("an MGET past its deadline answered")
	})
	var le *late.Error
	if !errors.As(err, &le) || !le.Unsent() {
		t.Fatalf("MGET past its deadline = %v; want lateness with nothing sent", err)
	}
	if n := p.Idle(); n != 1 {
		t.Fatalf("%d idle connections after a late MGET, want its connection kept", n)
	}
	got, err := leanGet(ctx, p, "a")
	if err != nil {
		t.Fatal(err)
	}
	sameVals(t, "mget after the late one", got, "1")
}
