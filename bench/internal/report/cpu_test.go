package report

import (
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/bench/internal/lab"
)

// TestCPURatios: every sidecache row, the built-in variants and the
// -cpu-sidecars builds alike, gets its line of ratios against NGINX.
func TestCPURatios(t *testing.T) {
	us := func(n ...int) []time.Duration {
		var out []time.Duration
		for _, v := range n {
			out = append(out, time.Duration(v)*time.Microsecond)
		}
		return out
	}
	r := &CPUReport{Started: time.Unix(0, 0), Results: []lab.CPUResult{
		{Test: "hit", Server: "sidecache (L1 hit)", PerReq: us(40, 44, 50)},
		{Test: "hit", Server: "sidecache GOMAXPROCS=2 (L1 hit)", PerReq: us(60, 66, 70)},
		{Test: "hit", Server: "before-abc (L1 hit)", PerReq: us(80)},
		{Test: "hit", Server: "nginx proxy_cache", PerReq: us(40)},
		{Test: "pass", Server: "sidecache (no routes)", PerReq: us(100, 110, 120)},
		{Test: "pass", Server: "sidecache GOMAXPROCS=2 (no routes)", PerReq: us(132)},
		{Test: "pass", Server: "before-abc (no routes)", PerReq: us(160)},
		{Test: "pass", Server: "nginx proxy_pass", PerReq: us(55)},
	}}
	md := r.Markdown()
	for _, want := range []string{
		"| sidecache | 2.50× | 1.10× | 2.00× |",
		"| sidecache GOMAXPROCS=2 | 2.00× | 1.65× | 2.40× |",
		"| before-abc | 2.00× | 2.00× | 2.91× |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the ratios lack %q:\n%s", want, md)
		}
	}
}

// TestCPUPathRatios: the rows only sidecache has get their ratios against
// the same sidecar's L1 hit and Redis's plain GET.
func TestCPUPathRatios(t *testing.T) {
	d := func(n int) []time.Duration { return []time.Duration{time.Duration(n) * time.Microsecond} }
	r := &CPUReport{Started: time.Unix(0, 0), Results: []lab.CPUResult{
		{Test: "hit", Server: "sidecache (L1 hit)", PerReq: d(40)},
		{Test: "batched miss", Server: "sidecache (batched miss)", PerReq: d(60), PerBulk: []float64{12}, IDs: 1},
		{Test: lab.BoundTest, Server: "sidecache (" + lab.BoundTest + ")", PerReq: d(50), PerBulk: []float64{11}, IDs: 1},
		{Test: "split", Server: "sidecache (split)", PerReq: d(400), IDs: 20},
		{Test: "l2 hit", Server: "sidecache (L2 hit, L1 off)", PerReq: d(50), RedisPerReq: d(9)},
		{Test: "l2 hit", Server: "redis GET, paced per command (reference)", RedisOnly: true, RedisPerReq: d(6)},
		{Test: "l2 hit", Server: "redis GET, paced in 1 ms batches (earlier reference)", RedisOnly: true, RedisPerReq: d(4)},
		{Test: "l2 hit", Server: "redis-benchmark GET, closed loop (reference)", RedisOnly: true, RedisPerReq: d(3)},
	}}
	md := r.Markdown()
	for _, want := range []string{
		"| sidecache | 1.50× | 1.25× | 0.50× | 1.25× | 1.50× | 2.25× | 3.00× |",
		"| split | sidecache (split) | 400.0 | 400.0–400.0 | 20.0 |",
		"| batched miss | sidecache (batched miss) | 60.0 | 60.0–60.0 |  | 12.0 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

// TestCPUBareRedisFloor: the l2 row's Go reference, bare Go at one core
// reading each body from Redis, gets its Redis column like sidecache's L2
// hit; the ratios give sidecache's L2-hit extra over bare Go's Redis-GET
// extra (for a sidecar at one core only) and bare Go's Redis ÷ memory as
// the floor; the bare rows get no ratio line of their own.
func TestCPUBareRedisFloor(t *testing.T) {
	d := func(n int) []time.Duration { return []time.Duration{time.Duration(n) * time.Microsecond} }
	r := &CPUReport{Started: time.Unix(0, 0), Results: []lab.CPUResult{
		{Test: "hit", Server: "sidecache (L1 hit)", PerReq: d(40)},
		{Test: "hit", Server: "sidecache GOMAXPROCS=2 (L1 hit)", PerReq: d(60)},
		{Test: "hit", Server: lab.BareMemoryServer, PerReq: d(30)},
		{Test: "l2 hit", Server: "sidecache (L2 hit, L1 off)", PerReq: d(64), RedisPerReq: d(9)},
		{Test: "l2 hit", Server: "sidecache GOMAXPROCS=2 (L2 hit, L1 off)", PerReq: d(90)},
		{Test: "l2 hit", Server: lab.BareRedisServer, PerReq: d(42), RedisPerReq: d(8)},
		{Test: "l2 hit", Server: "redis GET, paced per command (reference)", RedisOnly: true, RedisPerReq: d(6)},
	}}
	md := r.Markdown()
	for _, want := range []string{
		"| l2 hit | bare Go GOMAXPROCS=1 (one Redis GET per request) | 42.0 | 42.0–42.0 |  |  | 8.0 (8.0–8.0) |",
		"| L2 hit ÷ L1 hit (goal ≤ 1.5×) | Redis per L2 hit ÷ paced GET (goal ≤ 1.5×) | Redis per L2 hit ÷ GET in 1 ms batches | Redis per L2 hit ÷ redis-benchmark GET | L2 hit's extra ÷ bare Go's Redis GET extra",
		"| sidecache | — | — | — | 1.60× | 1.50× | — | — | 2.00× (24.0 ÷ 12.0 µs) | 1.40× |",
		"| sidecache GOMAXPROCS=2 | — | — | — | 1.50× | — | — | — | — (GOMAXPROCS≠1) | 1.40× |",
		"The Go reference: *bare Go GOMAXPROCS=1 (one Redis GET per request)*",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| bare Go GOMAXPROCS=1 | ") {
		t.Errorf("a bare Go row got a sidecar's ratio line:\n%s", md)
	}

	// l2 alone (-cpu-rows l2): the from-memory row is an l2 row; the
	// floor still shows, the extra needs the sidecar's L1 hit.
	r.Results = []lab.CPUResult{
		{Test: "l2 hit", Server: "sidecache (L2 hit, L1 off)", PerReq: d(64), RedisPerReq: d(9)},
		{Test: "l2 hit", Server: lab.BareMemoryServer, PerReq: d(30)},
		{Test: "l2 hit", Server: lab.BareRedisServer, PerReq: d(42), RedisPerReq: d(8)},
	}
	if md := r.Markdown(); !strings.Contains(md, "| sidecache | — | — | — | — | — | — | — | — | 1.40× |") {
		t.Errorf("l2 alone: the floor is missing:\n%s", md)
	}

	// Noise can make a difference negative: no ratio, the µs shown.
	r.Results = []lab.CPUResult{
		{Test: "hit", Server: "sidecache (L1 hit)", PerReq: d(40)},
		{Test: "hit", Server: lab.BareMemoryServer, PerReq: d(45)},
		{Test: "l2 hit", Server: "sidecache (L2 hit, L1 off)", PerReq: d(64)},
		{Test: "l2 hit", Server: lab.BareRedisServer, PerReq: d(42)},
	}
	if md := r.Markdown(); !strings.Contains(md, "| — (24.0 ÷ -3.0 µs) | 0.93× |") {
		t.Errorf("a negative bare extra got a ratio:\n%s", md)
	}
}

// TestCPUL2Split: with the L2 hit's MGET measured from the paced loop,
// the report splits Redis per L2 hit ÷ paced GET into the command's share
// and the serving conditions', beside bare Go's GET ÷ the paced GET; no
// split without that row.
func TestCPUL2Split(t *testing.T) {
	d := func(n int) []time.Duration { return []time.Duration{time.Duration(n) * time.Microsecond} }
	r := &CPUReport{Started: time.Unix(0, 0), Results: []lab.CPUResult{
		{Test: "hit", Server: "sidecache (L1 hit)", PerReq: d(40)},
		{Test: "l2 hit", Server: "sidecache (L2 hit, L1 off)", PerReq: d(64), RedisPerReq: d(24)},
		{Test: "l2 hit", Server: lab.BareRedisServer, PerReq: d(42), RedisPerReq: d(20)},
		{Test: "l2 hit", Server: "redis GET, paced per command (reference)", RedisOnly: true, RedisPerReq: d(16)},
		{Test: "l2 hit", Server: lab.L2ReadLoopServer, RedisOnly: true, RedisPerReq: d(18)},
	}}
	md := r.Markdown()
	for _, want := range []string{
		"| sidecar | Redis per L2 hit ÷ paced GET (goal ≤ 1.5×) | = the command: paced MGET ÷ paced GET | × serving it: L2 hit ÷ paced MGET | a plain GET served: bare Go's GET ÷ paced GET |",
		"| sidecache | 1.50× | 1.12× | 1.33× | 1.25× |",
		"| l2 hit | " + lab.L2ReadLoopServer + " | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	r.Results = r.Results[:4]
	if md := r.Markdown(); strings.Contains(md, "paced MGET") {
		t.Errorf("a split without the MGET row:\n%s", md)
	}
}

// TestCPUHitShareLowestRound: the hits column shows the median round's
// share, and the lowest round's beside it when that one served misses (a
// full run once outlasted the hit rows' TTL: its last round served 96 %
// hits behind a median of 100 %).
func TestCPUHitShareLowestRound(t *testing.T) {
	d := func(n int) []time.Duration { return []time.Duration{time.Duration(n) * time.Microsecond} }
	r := &CPUReport{Started: time.Unix(0, 0), Results: []lab.CPUResult{
		{Test: "hit", Server: "sidecache (L1 hit)", PerReq: d(40), HitShare: 1, MinHitShare: 0.96},
		{Test: "hit", Server: "before-abc (L1 hit)", PerReq: d(40), HitShare: 1, MinHitShare: 1},
	}}
	md := r.Markdown()
	for _, want := range []string{
		"| hit | sidecache (L1 hit) | 40.0 | 40.0–40.0 |  |  |  | 100 % (lowest round 96 %) |",
		"| hit | before-abc (L1 hit) | 40.0 | 40.0–40.0 |  |  |  | 100 % |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the table lacks %q:\n%s", want, md)
		}
	}
}

// TestCPUBatchBound: the batched miss with L1 at its bound gets its row
// (hits read 0 %: every request a miss, as the batch row's), its note
// (the L1's state) and its ratio to the same sidecar's L1 hit beside the
// filling row's, also for a sidecar measured on that row alone.
func TestCPUBatchBound(t *testing.T) {
	d := func(n int) []time.Duration { return []time.Duration{time.Duration(n) * time.Microsecond} }
	bound := func(name string, n int) lab.CPUResult {
		return lab.CPUResult{Test: lab.BoundTest, Server: name + " (" + lab.BoundTest + ")", PerReq: d(n), PerBulk: []float64{11}, IDs: 1}
	}
	r := &CPUReport{Started: time.Unix(0, 0), Results: []lab.CPUResult{
		{Test: "hit", Server: "sidecache (L1 hit)", PerReq: d(40), HitShare: 1, MinHitShare: 1},
		{Test: "hit", Server: "before-abc (L1 hit)", PerReq: d(50), HitShare: 1, MinHitShare: 1},
		{Test: "batched miss", Server: "sidecache (batched miss)", PerReq: d(90), PerBulk: []float64{12}, IDs: 1},
		bound("sidecache", 73),
		bound("before-abc", 100),
	}}
	r.Results[3].Note = "l1.max_bytes 32MiB, full"
	md := r.Markdown()
	for _, want := range []string{
		"| batched miss | sidecache (batched miss) | 90.0 | 90.0–90.0 |  | 12.0 |  | 0 % |",
		"| batched miss, L1 at its bound | sidecache (batched miss, L1 at its bound) | 73.0 | 73.0–73.0 |  | 11.0 |  | 0 % |",
		"| sidecar | batched miss ÷ hit (goal ≤ 1.3×) | batched miss, L1 at its bound ÷ hit | split per id ÷ hit |",
		"| sidecache | 2.25× | 1.82× | — |",
		"| before-abc | — | 2.00× | — |",
		"sidecache (batched miss, L1 at its bound): l1.max_bytes 32MiB, full.",
		"Batched miss, L1 at its bound: the same load on a sidecar of its own whose L1 (" + lab.BoundL1 + ") is full and evicting before each round",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

// TestCPUBatchFloor: the batch row's Go reference, bare Go at one core
// batching the same ids and then serving them from memory, gives the
// floor of the batched goal (its miss ÷ its hit), each sidecar's batched
// miss extra over bare Go's (for a sidecar at one core only) and both
// requests per bulk call; the bare rows get no ratio line of their own,
// and without them there is no floor table.
func TestCPUBatchFloor(t *testing.T) {
	d := func(n int) []time.Duration { return []time.Duration{time.Duration(n) * time.Microsecond} }
	r := &CPUReport{Started: time.Unix(0, 0), Results: []lab.CPUResult{
		{Test: "hit", Server: "sidecache (L1 hit)", PerReq: d(40), HitShare: 1, MinHitShare: 1},
		{Test: "hit", Server: "sidecache GOMAXPROCS=2 (L1 hit)", PerReq: d(60), HitShare: 1, MinHitShare: 1},
		{Test: "batched miss", Server: "sidecache (batched miss)", PerReq: d(70), PerBulk: []float64{20.5, 21.7, 23}, IDs: 1},
		{Test: "batched miss", Server: "sidecache GOMAXPROCS=2 (batched miss)", PerReq: d(90), PerBulk: []float64{25}, IDs: 1},
		{Test: "batched miss", Server: lab.BareBatchServer, PerReq: d(48), PerBulk: []float64{19.2}, IDs: 1},
		{Test: "hit", Server: lab.BareBatchHitServer, PerReq: d(32), IDs: 1, HitShare: 1, MinHitShare: 1},
		{Test: "batched miss", Server: lab.BareBatchLeanServer, PerReq: d(40), PerBulk: []float64{19.8}, IDs: 1},
	}}
	md := r.Markdown()
	for _, want := range []string{
		"| batched miss | " + lab.BareBatchServer + " | 48.0 | 48.0–48.0 |  | 19.2 |  | 0 % |",
		"| hit | " + lab.BareBatchHitServer + " | 32.0 | 32.0–32.0 |  |  |  | 100 % |",
		"| sidecar | batched miss ÷ hit (goal ≤ 1.3×) | floor of the batched goal (bare Go GOMAXPROCS=1: batched miss ÷ from memory) | the floor with sidecache's splitter | batched miss's extra ÷ bare Go's batched extra (µs over the hit, GOMAXPROCS=1) | the extra over bare Go's with sidecache's splitter | requests per bulk call: sidecar / bare Go / bare Go with sidecache's splitter |",
		"| sidecache | 1.75× | 1.50× | 1.25× | 1.88× (30.0 ÷ 16.0 µs) | 3.75× (30.0 ÷ 8.0 µs) | 21.7 / 19.2 / 19.8 |",
		"| sidecache GOMAXPROCS=2 | 1.50× | 1.50× | 1.25× | — (GOMAXPROCS≠1) | — (GOMAXPROCS≠1) | 25.0 / 19.2 / 19.8 |",
		"The batched floor: *" + lab.BareBatchServer + "*",
		"*" + lab.BareBatchLeanServer + "* is the same server splitting each answer with sidecache's own splitter",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| bare Go GOMAXPROCS=1 | ") {
		t.Errorf("a bare Go row got a sidecar's ratio line:\n%s", md)
	}
	if strings.Contains(md, "The Go reference:") {
		t.Errorf("the l2 row's Go reference explained in a run without it:\n%s", md)
	}

	// -cpu-rows batch alone: no L1 hit, so no goal ratio nor extra; the
	// floor still shows.
	r.Results = []lab.CPUResult{r.Results[2], r.Results[4], r.Results[5]}
	if md := r.Markdown(); !strings.Contains(md, "| sidecache | — | 1.50× | — | — | — | 21.7 / 19.2 / — |") {
		t.Errorf("batch alone: the floor is missing:\n%s", md)
	}

	// Without the bare rows, no floor table.
	r.Results = r.Results[:1]
	if md := r.Markdown(); strings.Contains(md, "floor of the batched goal") {
		t.Errorf("a floor table without the bare rows:\n%s", md)
	}
}
