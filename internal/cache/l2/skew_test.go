package l2

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// shifted is a clock off the real one by what off holds (ns).
func shifted(off *atomic.Int64) func(*Options) {
	return func(o *Options) {
		o.clock = func() time.Time { return time.Now().Add(time.Duration(off.Load())) }
	}
}

// A replica whose clock runs more than MaxLag/4 off Redis's stamps entries
// and epochs that the other replicas' stamps cannot be compared with: it
// must neither read nor store L2 entries, nor claim a proof, until its
// clock agrees again. Before skew.go nothing compared the clocks. The
// clock is the store's own (Options.clock), moved by the test; the
// process's is untouched.
func TestSkewedClockStopsL2(t *testing.T) {
	srv := redistest.Start(t)
	lag := 400 * time.Millisecond
	for _, off := range []time.Duration{2 * lag, -2 * lag} {
		var shift atomic.Int64
		r := newReplica(t, []string{srv.Addr()}, lagged(lag), shifted(&shift))
		ctx := context.Background()
		waitProven(t, r)
		if r.Skewed() {
			t.Fatalf("skewed with the real clock (offset %v)", r.ClockOffset())
		}
		if err := r.Set(ctx, "k", entry("v1", time.Minute, "t")); err != nil {
			t.Fatal(err)
		}
		r.flush(t)
		if _, ok := r.mustGet(t, "k"); !ok {
			t.Fatal("entry not read back with the real clock")
		}

		shift.Store(int64(off))
		eventually(t, 10*time.Second, func() error {
			if !r.Skewed() {
				return errNotYet
			}
			return nil
		})
		if _, _, err := r.Get(ctx, "k"); !errors.Is(err, ErrSkewed) {
			t.Errorf("clock %v off: Get err = %v, want ErrSkewed", off, err)
		}
		if err := r.Set(ctx, "k2", entry("v2", time.Minute, "t")); !errors.Is(err, ErrSkewed) {
			t.Errorf("clock %v off: Set err = %v, want ErrSkewed", off, err)
		}
		if p := r.Proof(); !p.Proven.IsZero() || !p.Skewed || !r.Proven().IsZero() {
			t.Errorf("clock %v off: proof %+v, want none and skewed", off, p)
		}
		if got := r.ClockOffset(); (got > 0) == (off > 0) || got.Abs() < lag {
			t.Errorf("clock %v off: offset %v", off, got)
		}

		shift.Store(0)
		eventually(t, 10*time.Second, func() error {
			if r.Skewed() {
				return errNotYet
			}
			return nil
		})
		waitProven(t, r)
		if _, ok := r.mustGet(t, "k"); !ok {
			t.Errorf("entry not read once the clock agrees again")
		}
		if n, _ := raw(t, srv.Addr()).Exists(ctx, "test:e:k2").Result(); n != 0 {
			t.Errorf("an entry was stored while the clock was skewed")
		}
		_ = r.Close()
	}
}
