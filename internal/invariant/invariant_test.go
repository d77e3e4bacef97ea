package invariant_test

import (
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The fixed seeds of `make test`: each starts its own Redis, origin and two
// replicas and runs rounds of concurrent requests through them.
var seeds = []uint64{1, 2, 3, 4}

const roundsPerSeed = 110

func TestInvariants(t *testing.T) {
	loopbackAliases(t)
	m := envMix(t)
	var total, batched304 atomic.Int64
	t.Cleanup(func() { t.Logf("%d randomized requests", total.Load()) })
	t.Run("seeds", func(t *testing.T) {
		for _, seed := range seeds {
			t.Run("", func(t *testing.T) {
				t.Parallel()
				e := startEnv(t, seed)
				rep := e.run(t, seed, roundsPerSeed, m)
				total.Add(int64(rep.Requests))
				batched304.Add(int64(rep.Checked["304-u"] + rep.Checked["304-e"]))
				report(t, seed, rep)
			})
		}
	})
	// The elements of a bulk answer keep their ETags beside a header they
	// share (cache.Entry.SetETag): the not-modified check must have seen
	// their 304s (the fixed seeds make 10 to 20 of them).
	if m.Has("batch") && m.Has("if-none-match") && !t.Failed() && batched304.Load() == 0 {
		t.Errorf("no 304 of a batched element (routes u and e) was checked")
	}
}

// FuzzInvariants runs one short sequence per input on one environment per
// fuzz worker: the input's bytes seed the draws.
//
//	go test -run - -fuzz FuzzInvariants -fuzztime 5m -parallel 1 ./internal/invariant
func FuzzInvariants(f *testing.F) {
	for _, s := range seeds {
		f.Add(s, uint8(8))
	}
	loopbackAliases(f)
	m := envMix(f)
	e := startEnv(f, 99)
	f.Fuzz(func(t *testing.T, seed uint64, rounds uint8) {
		rep := e.run(t, seed, 1+int(rounds%16), m)
		report(t, seed, rep)
	})
}

// TestSoak runs seed after seed for INVARIANT_SOAK (a Go duration) on one
// environment: `make soak-invariants DURATION=10m`. Skipped without it.
func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("INVARIANT_SOAK"))
	if err != nil || d <= 0 {
		t.Skip("set INVARIANT_SOAK=10m (make soak-invariants DURATION=10m)")
	}
	loopbackAliases(t)
	m := envMix(t)
	if !strings.Contains(os.Getenv("INVARIANT_FEATURES"), "list-crowd-large") {
		m["list-crowd-large"] = true // the soak has the time for it
	}
	e := startEnv(t, 1000)
	deadline := time.Now().Add(d)
	var requests, bad int
	for seed := uint64(1000); time.Now().Before(deadline); seed++ {
		rep := e.run(t, seed, 50, m)
		requests += rep.Requests
		if len(rep.Violations) > 0 {
			bad++
			report(t, seed, rep)
		}
	}
	t.Logf("soak: %d randomized requests, %d seeds with violations", requests, bad)
}
