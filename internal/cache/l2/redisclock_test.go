package l2

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// A skew under max_lag/4 leaves a replica using L2, and its stamps used to
// be its own clock's: a filler 150 ms ahead stamped a fill begun before a
// peer's write 150 ms late, past the write's epoch, and the entry was read
// as current until its TTL; a writer 150 ms behind raised the epoch below
// a fill begun before its write, to the same effect. With stamps and
// epochs on Redis's clock as each heartbeat measures it (skew.go) the fill
// is refused, on the script's read and on the MGET's. Each replica's clock
// is its own Options.clock; no sleep: the fill begins, then the write, then
// the fill is stored, each acknowledged before the next.
func TestStampsOnRedisClock(t *testing.T) {
	srv := redistest.Start(t)
	lag := time.Second // skewed past 250 ms: 150 ms is not
	const d = 150 * time.Millisecond
	for _, tc := range []struct {
		name           string
		filler, writer time.Duration
	}{
		{"filler ahead", d, 0},
		{"writer behind", 0, -d},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			_ = raw(t, srv.Addr()).FlushAll(ctx).Err()
			var fs, ws atomic.Int64
			fs.Store(int64(tc.filler))
			ws.Store(int64(tc.writer))
			filler := newReplica(t, []string{srv.Addr()}, lagged(lag), shifted(&fs))
			writer := newReplica(t, []string{srv.Addr()}, lagged(lag), shifted(&ws))
			for _, r := range []*replica{filler, writer} {
				waitProven(t, r)
				if r.Skewed() {
					t.Fatalf("skewed at %v (offset %v): the test needs a skew under max_lag/4", r.opts.clock().Sub(time.Now()).Round(time.Millisecond), r.ClockOffset())
				}
			}
			eventually(t, 10*time.Second, func() error {
				if off := filler.ClockOffset() + writer.ClockOffset(); off > -d/2 && off < d/2 {
					return errNotYet // the shifted clock not measured yet
				}
				return nil
			})
			// The tag's epoch key exists, as after any earlier fill.
			if err := filler.Set(ctx, "k0", entry("first", time.Minute, "t")); err != nil {
				t.Fatal(err)
			}
			filler.flush(t)

			began := filler.opts.clock() // the fill's request leaves
			if err := writer.InvalidateTags(ctx, "t"); err != nil {
				t.Fatal(err)
			}
			old := entry("before the write", time.Minute, "t")
			old.StoredAt = began
			if err := filler.Set(ctx, "k", old); err != nil {
				t.Fatal(err)
			}
			filler.flush(t)

			for i, r := range []*replica{writer, filler, writer} { // the script's read, the MGET's, the MGET's
				if e, ok := r.mustGet(t, "k"); ok {
					t.Errorf("read %d: %q, fetched before the write it follows (offsets: filler %v, writer %v)",
						i, e.Body, filler.ClockOffset(), writer.ClockOffset())
				}
			}
			// A fill begun after the write is kept, once the clocks have
			// moved past the measure's error (a miss until then).
			eventually(t, 10*time.Second, func() error {
				fresh := entry("after the write", time.Minute, "t")
				fresh.StoredAt = filler.opts.clock()
				if err := filler.Set(ctx, "k", fresh); err != nil {
					return err
				}
				filler.flush(t)
				if _, ok := writer.mustGet(t, "k"); !ok {
					return errNotYet
				}
				return nil
			})
		})
	}
}
