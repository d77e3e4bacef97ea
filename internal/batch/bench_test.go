package batch

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// processCPU is the process's CPU time so far, user and system: a load's
// cost is mostly in goroutines the benchmark's own do not run (the
// batch's, the timers'), and its ns/op is the upstream's latency over
// the loads in flight, not work.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// shape is how benchLoads' loads wait, and how many are in flight.
type shape struct {
	// wait: 0 in Load; byThen told by LoadThen; bySlot told by LoadTo,
	// with the result in the waiter's own allocation (the proxy's lead).
	wait int
	par  int // loads in flight per GOMAXPROCS; 0 means 64
}

const (
	byThen = 1 + iota
	bySlot
)

// benchWaiter is a load's own allocation, as the proxy's lead is: its
// Waiter and the room for its result.
type benchWaiter struct {
	told chan<- loaded
	slot Slot[int]
}

type loaded struct {
	found bool
	err   error
}

func (w *benchWaiter) Loaded(_ int, found bool, err error) { w.told <- loaded{found, err} }

// benchLoads runs b.N loads of distinct ids from GOMAXPROCS·sh.par
// goroutines through a loader with opts, whose fetch takes latency and
// fails with ErrIsolate for every id divisible by badEvery (0: none), and
// reports the ids per call, the calls per load and the process's CPU per
// load (cpu-ns/op). group gives each load's group; sh how loads wait.
func benchLoads(b *testing.B, opts Options, latency time.Duration, badEvery int64, group func(n int64) string, sh shape) {
	var fetches, ids atomic.Int64
	fetch := func(_ context.Context, _ struct{}, batch []string) (map[string]int, error) {
		fetches.Add(1)
		ids.Add(int64(len(batch)))
		if latency > 0 {
			time.Sleep(latency)
		}
		m := make(map[string]int, len(batch))
		for i, id := range batch {
			if n, _ := strconv.ParseInt(id, 10, 64); badEvery > 0 && n%badEvery == 0 {
				return nil, fmt.Errorf("%w: bad id %s", ErrIsolate, id)
			}
			m[id] = i
		}
		return m, nil
	}
	l := New(opts, fetch)
	defer l.Close()
	var next atomic.Int64
	ctx := context.Background()

	b.SetParallelism(cmp.Or(sh.par, 64))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		told := make(chan loaded, 1)
		tell := func(_ int, found bool, err error) { told <- loaded{found, err} }
		for pb.Next() {
			n := next.Add(1)
			id := strconv.FormatInt(n, 10)
			var found bool
			var err error
			switch sh.wait {
			case byThen:
				l.LoadThen(ctx, nil, group(n), struct{}{}, id, tell)
			case bySlot:
				w := &benchWaiter{told: told}
				l.LoadTo(ctx, nil, group(n), noArg, id, w, &w.slot)
			default:
				_, found, err = l.Load(ctx, group(n), struct{}{}, id)
			}
			if sh.wait != 0 {
				o := <-told
				found, err = o.found, o.err
			}
			if bad := badEvery > 0 && n%badEvery == 0; bad != (err != nil) || !bad && !found {
				b.Fatalf("load %s: found=%v err=%v", id, found, err)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
	if f := fetches.Load(); f > 0 {
		b.ReportMetric(float64(ids.Load())/float64(f), "ids/call")
		b.ReportMetric(float64(f)/float64(b.N), "calls/load")
	}
}

func oneGroup(int64) string { return "g" }

func noArg() struct{} { return struct{}{} }

// BenchmarkLoad measures batch assembly under contention: a fetch that
// answers at once, and one that takes as long as a nearby upstream, where
// the adaptive window fills calls while others are in flight.
func BenchmarkLoad(b *testing.B) {
	for _, latency := range []time.Duration{0, 500 * time.Microsecond} {
		b.Run(fmt.Sprint("upstream=", latency), func(b *testing.B) {
			benchLoads(b, Options{MaxSize: 100, MaxWait: time.Millisecond}, latency, 0, oneGroup, shape{})
		})
	}
}

// BenchmarkLoadBounded is BenchmarkLoad with the proxy's queue bounds
// on (MaxQueued ten rounds of calls, a Deadline no batch reaches): the
// cost of their bookkeeping on the hot path (the queue's count per id, a
// clock read per call that returns with a queue), to compare with
// BenchmarkLoad's.
func BenchmarkLoadBounded(b *testing.B) {
	for _, latency := range []time.Duration{0, 500 * time.Microsecond} {
		b.Run(fmt.Sprint("upstream=", latency), func(b *testing.B) {
			benchLoads(b, Options{MaxSize: 100, MaxWait: time.Millisecond, MaxQueued: 10 * 100 * DefaultMaxInFlight,
				Deadline: func() time.Duration { return time.Minute }}, latency, 0, oneGroup, shape{})
		})
	}
}

// BenchmarkLoadThen is BenchmarkLoad's nearby upstream with loads told by
// LoadThen (the proxy's batched misses) instead of waiting in Load: no
// channel per id, and the waiter woken by its own channel here as the
// proxy's flight is by its own.
func BenchmarkLoadThen(b *testing.B) {
	benchLoads(b, Options{MaxSize: 100, MaxWait: time.Millisecond}, 500*time.Microsecond, 0, oneGroup, shape{wait: byThen})
}

// BenchmarkLoadQuiet is the proxy's batched misses at a moderate rate:
// 24 loads in flight, told by LoadTo with their results in their own
// allocation, so that each batch waits out MaxWait, goes with 24 ids, and
// the group is idle from its answer to the next load, as between the
// bulk calls of an open-loop load of ~24 ids per call. What it measures
// is the loader's work per batch spread over a few ids.
func BenchmarkLoadQuiet(b *testing.B) {
	par := max(24/runtime.GOMAXPROCS(0), 1)
	benchLoads(b, Options{MaxSize: 100, MaxWait: time.Millisecond}, 500*time.Microsecond, 0, oneGroup, shape{wait: bySlot, par: par})
}

// BenchmarkLoadIsolate: one id in a hundred makes its call fail with
// ErrIsolate, so most batches are split down to their bad ids.
func BenchmarkLoadIsolate(b *testing.B) {
	benchLoads(b, Options{MaxSize: 100, MaxWait: time.Millisecond}, 0, 100, oneGroup, shape{})
}

// BenchmarkLoadManyGroups: every load in a group of its own, ten times
// more groups than MaxGroups allows, the shape of a client varying a header.
func BenchmarkLoadManyGroups(b *testing.B) {
	benchLoads(b, Options{MaxSize: 100, MaxWait: time.Millisecond, MaxGroups: 64}, 0, 0,
		func(n int64) string { return strconv.FormatInt(n%640, 10) }, shape{})
}

// BenchmarkLoadJoin is the caller's side of a load, as a request pays it
// before it waits: LoadThen of a new id into the open batch of a group
// named as the proxy names one (a host and a credential), on one
// goroutine. Each batch of 100 goes when full and is waited for before
// the next load, with a fetch that answers at once and a then that only
// counts, so that the batch's goroutine and its wake-ups cost a hundredth
// of each load and no queue of batches builds up.
// Run: go test -run - -bench LoadJoin -benchmem ./internal/batch
func BenchmarkLoadJoin(b *testing.B) {
	const size = 100
	l := New(Options{MaxSize: size, MaxWait: time.Hour}, func(context.Context, struct{}, []string) (map[string]int, error) {
		return nil, nil
	})
	defer l.Close()
	ids := make([]string, 1<<16)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	const group = "api.example.com\nAuthorization\x00Bearer 0123456789abcdef"
	ctx := context.Background()
	var told atomic.Int64
	then := func(int, bool, error) { told.Add(1) }
	b.ReportAllocs()
	n := int64(0)
	for b.Loop() {
		l.LoadThen(ctx, nil, group, struct{}{}, ids[n%int64(len(ids))], then)
		if n++; n%size == 0 {
			for told.Load() < n {
				runtime.Gosched()
			}
		}
	}
}
