package lab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sidecache/sidecache/bench/internal/load"
)

// CPUParams is the CPU-per-request run (-cpu): every server under test at
// one fixed, unsaturated rate, so what differs between them is the CPU each
// spends per request, not how many requests each could squeeze in.
type CPUParams struct {
	Rate      int           // open-loop req/s
	SplitRate int           // open-loop req/s of the split row (each request holds Bulk ids)
	Workers   int           // connections of the load generator
	Rounds    int           // interleaved rounds; the median is reported
	Extra     []CPUSidecar  // more sidecache binaries (e.g. a build of an older commit)
	Time      time.Duration // measured time per cell
	Rows      []string      // CPURows to run; empty: all
}

// CPURows are the -cpu-rows names: the L1 hit and the pass-through on
// GET /clients/{id}, and the paths only sidecache has — batched misses,
// the split of a bulk read, the L2 hit (with Redis's plain GET beside it).
func CPURows() []string { return []string{"hit", "pass", "batch", "split", "l2"} }

func (cp CPUParams) row(name string) bool { return len(cp.Rows) == 0 || slices.Contains(cp.Rows, name) }

// The bare Go server's rows at GOMAXPROCS=1 (sidecache's default), by
// which the report finds them: from memory (the hit row, or the l2 row
// when hit is not measured) and reading each body from Redis (the l2
// row). Their difference is what one Redis round trip alone costs a Go
// server, the floor of what an L2 hit can add to an L1 hit.
const (
	BareMemoryServer = "bare Go GOMAXPROCS=1 (from memory)"
	BareRedisServer  = "bare Go GOMAXPROCS=1 (one Redis GET per request)"
	// BareBatchServer and BareBatchHitServer are the batch row's Go
	// reference (batchFloor): the bare server at GOMAXPROCS=1 batching
	// GET /users/{id} misses into bulk calls to the demo, and then serving
	// the same ids from memory. Their difference is what batching costs a
	// Go server built from the standard library: the floor the batched
	// miss's extra over a hit is read against.
	BareBatchServer    = "bare Go GOMAXPROCS=1 (batched miss)"
	BareBatchHitServer = "bare Go GOMAXPROCS=1 (the batched ids from memory)"
	// BareBatchLeanServer is the same batching with sidecache's splitter
	// in place of encoding/json (-batch-lean): the floor with Go's
	// plumbing alone (net/http both ways, a goroutine per waiter, one
	// map) left of the standard library's part.
	BareBatchLeanServer = "bare Go GOMAXPROCS=1 (batched miss, sidecache's splitter)"
	// L2ReadLoopServer is the l2 row's reference issuing the L2 hit's own
	// MGET from the paced GET's loop.
	L2ReadLoopServer = "redis MGET of an L2 entry and its epoch keys, paced per command (the L2 hit's command)"
)

// CPUSidecar is one more sidecache binary, or the same with more
// environment, measured beside -sidecache.
type CPUSidecar struct {
	Name, Bin string
	Env       []string // KEY=value added to the bench's environment
}

// ParseCPUSidecars reads -cpu-sidecars: "name=path,name=path". A path may
// be followed by environment for that process, space-separated KEY=value
// words ("pod=bin/sidecache GOMEMLIMIT=241591910"), so the same binary can
// be measured as a deployment runs it (a memory limit turns on
// cmd/sidecache's GOGC default) beside its plain default.
func ParseCPUSidecars(s string) ([]CPUSidecar, error) {
	var out []CPUSidecar
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		name, rest, ok := strings.Cut(f, "=")
		words := strings.Fields(rest)
		if !ok || name == "" || len(words) == 0 {
			return nil, fmt.Errorf("bad -cpu-sidecars entry %q (want name=path [KEY=value ...])", f)
		}
		sc := CPUSidecar{Name: name, Bin: words[0]}
		for _, kv := range words[1:] {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return nil, fmt.Errorf("bad -cpu-sidecars entry %q: %q is not KEY=value", f, kv)
			}
			sc.Env = append(sc.Env, kv)
		}
		out = append(out, sc)
	}
	return out, nil
}

// CPUResult is one server on one path.
type CPUResult struct {
	Test, Server string
	// PerReq is the CPU time (user + system) of the server's processes
	// per answered request, one value per round, sorted. Empty for a
	// Redis-only row (RedisOnly).
	PerReq []time.Duration
	// RedisPerReq is Redis's CPU (INFO cpu) per answered request, one
	// value per round, sorted; empty for rows that do not use Redis.
	RedisPerReq []time.Duration
	RedisOnly   bool      // a plain Redis client, no sidecar
	PerBulk     []float64 // requests answered per upstream bulk call, per round, sorted
	IDs         int       // ids per request (the split row), for µs per id
	HitShare    float64   // Cache-Status hits over answers, median round
	MinHitShare float64   // the lowest round's: a round that served misses shows even when the median did not
	TPS         float64   // achieved rate of the median round
	Errors      int       // over every round
	Missing     string    // why not measured
	Note        string    // how the row was set up (value size, ...)
}

// Median is the median round's CPU per request (the lower middle one).
func (r CPUResult) Median() time.Duration { return median(r.PerReq) }

// RedisMedian is the median round's Redis CPU per request.
func (r CPUResult) RedisMedian() time.Duration { return median(r.RedisPerReq) }

func median[T time.Duration | float64](v []T) T {
	if len(v) == 0 {
		return 0
	}
	return v[(len(v)-1)/2]
}

// cpuEntry is one server on one path.
type cpuEntry struct {
	row, test, server string
	start             func() (*sut, error)
	fill              bool                                            // GET /clients/1..keys once before the warm-up
	rate              int                                             // 0: CPUParams.Rate
	next              func() load.Request                             // nil: GET /clients/{id}
	prep              func(*sut) error                                // before the warm-up and before every round
	after             func(*sut) error                                // after every measured cell, its CPU read
	redis             string                                          // Redis address whose CPU counts too
	bulk              bool                                            // count the demo's bulk calls (GET /users)
	ids               int                                             // ids per request
	cell              func(time.Duration) (ok, failed int, err error) // a Redis-only cell instead of an HTTP attack
	note              func() string
	sidecar           int // 1 + the sidecar's index in the run's list (roundOrder); 0: a peer, a floor, a Redis-only cell
}

// roundOrder is the order round (from 1) measures entries in: as listed,
// but in each run of consecutive sidecar entries the n sidecars take
// turns to go first, each keeping its own entries' order. The cell
// measured first in a run read higher than the same binary measured later
// (bench/README.md, eighth pass: main 48.7 / 42.3 µs per hit first,
// 43.0 second, the before-binary 47.3 first, 41.3 / 38.0 second), so
// a fixed order charged that to whichever sidecar was listed first.
func roundOrder(entries []cpuEntry, n, round int) []int {
	order := make([]int, 0, len(entries))
	for i := 0; i < len(entries); {
		j := i
		for j < len(entries) && entries[j].sidecar > 0 {
			j++
		}
		if j == i {
			order = append(order, i)
			i++
			continue
		}
		run := make([]int, 0, j-i)
		for k := i; k < j; k++ {
			run = append(run, k)
		}
		turn := func(k int) int { return (entries[k].sidecar - 1 + n - (round-1)%n) % n }
		slices.SortStableFunc(run, func(a, b int) int { return turn(a) - turn(b) })
		order = append(order, run...)
		i = j
	}
	return order
}

// cellOut is what one measured cell gives.
type cellOut struct {
	ok, errors    int
	tps, hitShare float64
	cpu, redisCPU time.Duration
	bulkCalls     int64
	firstErr      string
}

// RunCPU measures CPU per request on the hit path (every key cached) and
// the pass-through path (a route-less proxy in front of the bare Go
// server, so the upstream's cost is not the proxy's) for sidecache, the
// extra sidecache binaries, and the installed peers; then sidecache's own
// paths (cpuRowEntries). The CPU is the servers' own: utime + stime of
// the process and its descendants (NGINX's workers, Varnish's child) from
// /proc, read before and after each cell, and Redis's from INFO cpu.
func (l *Lab) RunCPU(ctx context.Context, cp CPUParams) ([]CPUResult, error) {
	log.Printf("cpu per request at %d req/s, %v per cell, %d rounds, rows %v", cp.Rate, cp.Time, cp.Rounds, cp.Rows)
	var bare *sut
	if cp.row("hit") || cp.row("pass") {
		var err error
		if bare, err = l.startBare(ctx); err != nil {
			return nil, fmt.Errorf("bare Go server: %w", err)
		}
		defer l.stopSUT(bare)
	}
	// The current build at its default (one core, cmd/sidecache/gc.go) and
	// with two, the machine's cores, as older builds ran: what the default
	// buys, and what the rest of the changes buy, apart.
	sidecars := append([]CPUSidecar{
		{Name: "sidecache", Bin: l.p.Sidecache},
		{Name: "sidecache GOMAXPROCS=2", Bin: l.p.Sidecache, Env: []string{"GOMAXPROCS=2"}},
	}, cp.Extra...)
	var entries []cpuEntry
	if cp.row("hit") {
		for k, sc := range sidecars {
			entries = append(entries, cpuEntry{row: "hit", test: "hit", server: sc.Name + " (L1 hit)", start: func() (*sut, error) {
				return l.startSidecarBin(ctx, sc, "hit", l.demoAddr, "")
			}, fill: true, sidecar: k + 1})
		}
		entries = append(entries,
			cpuEntry{row: "hit", test: "hit", server: "nginx proxy_cache", start: func() (*sut, error) { return l.startNginx(ctx, l.demoAddr, true) }, fill: true},
			cpuEntry{row: "hit", test: "hit", server: "varnish", start: func() (*sut, error) { return l.startVarnish(ctx, l.demoAddr) }, fill: true},
			cpuEntry{row: "hit", test: "hit", server: "bare Go (from memory)", start: func() (*sut, error) { return bare, nil }},
			// net/http's own floor on one core, beside sidecache's default.
			cpuEntry{row: "hit", test: "hit", server: BareMemoryServer, start: func() (*sut, error) { return l.startBare(ctx, "GOMAXPROCS=1") }},
			cpuEntry{row: "hit", test: "hit", server: "fasthttp L1 hit (prototype)", start: func() (*sut, error) { return l.startFastHit(ctx, l.demoAddr) }, fill: true})
	}
	if cp.row("pass") {
		for k, sc := range sidecars {
			entries = append(entries, cpuEntry{row: "pass", test: "pass", server: sc.Name + " (no routes)", start: func() (*sut, error) {
				return l.startSidecarBin(ctx, sc, "pass", bare.addr, "")
			}, sidecar: k + 1})
		}
		entries = append(entries,
			cpuEntry{row: "pass", test: "pass", server: "nginx proxy_pass", start: func() (*sut, error) { return l.startNginx(ctx, bare.addr, false) }})
	}
	more, err := l.cpuRowEntries(ctx, cp, sidecars)
	if err != nil {
		return nil, err
	}
	entries = append(entries, more...)

	w, _ := load.PickWorkloads([]string{"clients-get"})
	attack := func(e cpuEntry, s *sut, d time.Duration) *load.Outcome {
		a := l.attack(s.addr, w[0], d, cmp.Or(e.rate, cp.Rate))
		a.Workers = cp.Workers
		if e.next != nil {
			a.Next, a.OK = e.next, func(code int) bool { return code == 200 }
		}
		return a.Run(ctx)
	}
	results := make([]CPUResult, len(entries))
	suts := make([]*sut, len(entries))
	for i, e := range entries {
		results[i] = CPUResult{Test: e.test, Server: e.server, IDs: e.ids, RedisOnly: e.cell != nil}
		if e.cell != nil {
			suts[i] = &sut{}
			continue
		}
		s, err := e.start()
		switch {
		case errors.Is(err, errNotInstalled):
			results[i].Missing = "not installed"
			continue
		case err != nil:
			results[i].Missing = "failed to start; see the bench log"
			log.Printf("  %s %s: %v", e.test, e.server, err)
			continue
		}
		if s != bare {
			defer l.stopSUT(s)
		}
		if e.fill {
			if err := prefill(ctx, s.addr, "/clients/", l.p.Keys); err != nil {
				results[i].Missing = err.Error()
				continue
			}
		}
		if e.prep != nil {
			if err := e.prep(s); err != nil {
				results[i].Missing = err.Error()
				continue
			}
		}
		if l.p.Warmup > 0 {
			attack(e, s, l.p.Warmup)
		}
		suts[i] = s
	}
	tps := make([][]float64, len(entries))
	hits := make([][]float64, len(entries))
	for round := 1; round <= cp.Rounds && ctx.Err() == nil; round++ {
		for _, i := range roundOrder(entries, len(sidecars), round) {
			s := suts[i]
			if s == nil || ctx.Err() != nil {
				continue
			}
			e := entries[i]
			out, err := l.cpuCell(ctx, e, s, cp.Time, attack)
			if err == nil && out.ok == 0 {
				err = errors.New("no request answered: " + out.firstErr)
			}
			if err != nil {
				results[i].Missing = err.Error()
				suts[i] = nil
				continue
			}
			r := &results[i]
			if !r.RedisOnly {
				r.PerReq = append(r.PerReq, out.cpu/time.Duration(out.ok))
			}
			if e.redis != "" {
				r.RedisPerReq = append(r.RedisPerReq, out.redisCPU/time.Duration(out.ok))
			}
			if e.bulk && out.bulkCalls > 0 {
				r.PerBulk = append(r.PerBulk, float64(out.ok)/float64(out.bulkCalls))
			}
			r.Errors += out.errors
			tps[i] = append(tps[i], out.tps)
			hits[i] = append(hits[i], out.hitShare)
			log.Printf("  round %d %-12s %-36s %6.1f µs/req  redis %5.1f µs/req  %6.0f req/s  hits %3.0f%%  errors %d",
				round, r.Test, r.Server, us(out.cpu)/float64(out.ok), us(out.redisCPU)/float64(out.ok), out.tps, 100*out.hitShare, out.errors)
		}
	}
	for i := range results {
		slices.Sort(results[i].PerReq)
		slices.Sort(results[i].RedisPerReq)
		slices.Sort(results[i].PerBulk)
		slices.Sort(tps[i])
		slices.Sort(hits[i])
		results[i].TPS, results[i].HitShare = median(tps[i]), median(hits[i])
		if len(hits[i]) > 0 {
			results[i].MinHitShare = hits[i][0]
		}
		if entries[i].note != nil && results[i].Missing == "" {
			results[i].Note = entries[i].note()
		}
	}
	return results, ctx.Err()
}

// cpuCell runs one measured cell of e: its preparation, then the load,
// with the CPU counters (and the demo's bulk calls) read on each side.
func (l *Lab) cpuCell(ctx context.Context, e cpuEntry, s *sut, d time.Duration,
	attack func(cpuEntry, *sut, time.Duration) *load.Outcome) (cellOut, error) {
	var out cellOut
	if e.prep != nil {
		if err := e.prep(s); err != nil {
			return out, err
		}
	}
	pids := s.pids()
	var before, rBefore time.Duration
	var counts map[string]int64
	var err error
	if e.cell == nil {
		if before, err = cpuTime(pids); err != nil {
			return out, err
		}
	}
	if e.redis != "" {
		if rBefore, err = redisCPU(ctx, e.redis); err != nil {
			return out, err
		}
	}
	if e.bulk {
		if counts, err = l.demo.counts(ctx); err != nil {
			return out, err
		}
	}
	if e.cell != nil {
		begin := time.Now()
		if out.ok, out.errors, err = e.cell(d); err != nil {
			return out, err
		}
		out.tps = float64(out.ok) / time.Since(begin).Seconds()
	} else {
		o := attack(e, s, d)
		out.ok, out.errors, out.tps, out.firstErr = o.OK, o.Errors, o.TPS(), o.FirstErr
		if o.OK > 0 {
			out.hitShare = float64(o.Hits) / float64(o.OK)
		}
		after, _ := cpuTime(pids)
		out.cpu = after - before
	}
	if e.redis != "" {
		after, err := redisCPU(ctx, e.redis)
		if err != nil {
			return out, err
		}
		out.redisCPU = after - rBefore
	}
	if e.bulk {
		after, err := l.demo.counts(ctx)
		if err != nil {
			return out, err
		}
		out.bulkCalls = after["GET /users"] - counts["GET /users"]
	}
	if e.after != nil {
		if err := e.after(s); err != nil {
			return out, err
		}
	}
	return out, nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// pids are the server's top-level processes (their descendants are found
// when the CPU is read, so NGINX workers respawned meanwhile still count).
func (s *sut) pids() []int {
	var out []int
	for _, pr := range s.procs {
		out = append(out, pr.Pid())
	}
	return out
}

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports (sysconf(_SC_CLK_TCK) needs
// cgo). At 3,000 req/s over 10 s one tick is 0.33 µs per request.
const clockTick = 10 * time.Millisecond

// cpuTime is the user + system time of pids and all their descendants.
func cpuTime(pids []int) (time.Duration, error) {
	if len(pids) == 0 {
		return 0, errors.New("no process to measure (the server is not a child of the bench)")
	}
	stats, err := procStats()
	if err != nil {
		return 0, err
	}
	want := map[int]bool{}
	for _, p := range pids {
		want[p] = true
	}
	// Descendants: iterate to a fixed point (process trees here are shallow).
	for changed := true; changed; {
		changed = false
		for pid, st := range stats {
			if !want[pid] && want[st.ppid] {
				want[pid], changed = true, true
			}
		}
	}
	var ticks uint64
	for pid := range want {
		ticks += stats[pid].ticks
	}
	return time.Duration(ticks) * clockTick, nil
}

type procStat struct {
	ppid  int
	ticks uint64 // utime + stime
}

// procStats reads every process's parent and CPU ticks from /proc.
func procStats() (map[int]procStat, error) {
	paths, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("read /proc: no process stats (%v); CPU per request needs Linux", err)
	}
	out := make(map[int]procStat, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // exited meanwhile
		}
		pid, st, ok := parseStat(string(b))
		if ok {
			out[pid] = st
		}
	}
	return out, nil
}

// parseStat reads pid, ppid, utime and stime from one /proc/<pid>/stat
// line (proc(5)); comm may hold spaces and parentheses, so fields are
// counted from the last ')'.
func parseStat(s string) (int, procStat, bool) {
	open, end := strings.IndexByte(s, ' '), strings.LastIndexByte(s, ')')
	if open < 0 || end < 0 || end+2 > len(s) {
		return 0, procStat{}, false
	}
	pid, err := strconv.Atoi(s[:open])
	if err != nil {
		return 0, procStat{}, false
	}
	f := strings.Fields(s[end+2:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, procStat{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])                // field 4
	utime, err2 := strconv.ParseUint(f[11], 10, 64) // field 14
	stime, err3 := strconv.ParseUint(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, procStat{}, false
	}
	return pid, procStat{ppid: ppid, ticks: utime + stime}, true
}
