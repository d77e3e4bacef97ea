package lab

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sidecache/sidecache/bench/internal/load"
)

// CPUParams is the CPU-per-request run (-cpu): every server under test at
// one fixed, unsaturated rate, so what differs between them is the CPU each
// spends per request, not how many requests each could squeeze in.
type CPUParams struct {
	Rate    int           // open-loop req/s
	Workers int           // connections of the load generator
	Rounds  int           // interleaved rounds; the median is reported
	Extra   []CPUSidecar  // more sidecache binaries (e.g. a build of an older commit)
	Time    time.Duration // measured time per cell
}

// CPUSidecar is one more sidecache binary, or the same with more
// environment, measured beside -sidecache.
type CPUSidecar struct {
	Name, Bin string
	Env       []string // KEY=value added to the bench's environment
}

// ParseCPUSidecars reads -cpu-sidecars: "name=path,name=path".
func ParseCPUSidecars(s string) ([]CPUSidecar, error) {
	var out []CPUSidecar
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		name, bin, ok := strings.Cut(f, "=")
		if !ok || name == "" || bin == "" {
			return nil, fmt.Errorf("bad -cpu-sidecars entry %q (want name=path)", f)
		}
		out = append(out, CPUSidecar{Name: name, Bin: bin})
	}
	return out, nil
}

// CPUResult is one server on one path.
type CPUResult struct {
	Test, Server string
	// PerReq is the CPU time (user + system) of the server's processes
	// per answered request, one value per round, sorted.
	PerReq  []time.Duration
	TPS     float64 // achieved rate of the median round
	Errors  int     // over every round
	Missing string  // why not measured
}

// Median is the median round's CPU per request (the lower middle one).
func (r CPUResult) Median() time.Duration {
	if len(r.PerReq) == 0 {
		return 0
	}
	return r.PerReq[(len(r.PerReq)-1)/2]
}

// RunCPU measures CPU per request on the hit path (every key cached) and
// the pass-through path (a route-less proxy in front of the bare Go
// server, so the upstream's cost is not the proxy's) for sidecache, the
// extra sidecache binaries, and the installed peers. The CPU is the
// servers' own: utime + stime of the process and its descendants (NGINX's
// workers, Varnish's child) from /proc, read before and after each cell.
func (l *Lab) RunCPU(ctx context.Context, cp CPUParams) ([]CPUResult, error) {
	log.Printf("cpu per request at %d req/s, %v per cell, %d rounds", cp.Rate, cp.Time, cp.Rounds)
	bare, err := l.startBare(ctx)
	if err != nil {
		return nil, fmt.Errorf("bare Go server: %w", err)
	}
	defer l.stopSUT(bare)
	type entry struct {
		test, server string
		start        func() (*sut, error)
		fill         bool
	}
	// The current build at its default (one core, cmd/sidecache/gc.go) and
	// with two, the machine's cores, as older builds ran: what the default
	// buys, and what the rest of the changes buy, apart.
	sidecars := append([]CPUSidecar{
		{Name: "sidecache", Bin: l.p.Sidecache},
		{Name: "sidecache GOMAXPROCS=2", Bin: l.p.Sidecache, Env: []string{"GOMAXPROCS=2"}},
	}, cp.Extra...)
	var entries []entry
	for _, sc := range sidecars {
		entries = append(entries, entry{"hit", sc.Name + " (L1 hit)", func() (*sut, error) {
			return l.startSidecarBin(ctx, sc, "cache", l.demoAddr, "")
		}, true})
	}
	entries = append(entries,
		entry{"hit", "nginx proxy_cache", func() (*sut, error) { return l.startNginx(ctx, l.demoAddr, true) }, true},
		entry{"hit", "varnish", func() (*sut, error) { return l.startVarnish(ctx, l.demoAddr) }, true},
		entry{"hit", "bare Go (from memory)", func() (*sut, error) { return bare, nil }, false},
		// net/http's own floor on one core, beside sidecache's default.
		entry{"hit", "bare Go GOMAXPROCS=1 (from memory)", func() (*sut, error) { return l.startBare(ctx, "GOMAXPROCS=1") }, false},
		entry{"hit", "fasthttp L1 hit (prototype)", func() (*sut, error) { return l.startFastHit(ctx, l.demoAddr) }, true})
	for _, sc := range sidecars {
		entries = append(entries, entry{"pass", sc.Name + " (no routes)", func() (*sut, error) {
			return l.startSidecarBin(ctx, sc, "pass", bare.addr, "")
		}, false})
	}
	entries = append(entries,
		entry{"pass", "nginx proxy_pass", func() (*sut, error) { return l.startNginx(ctx, bare.addr, false) }, false})

	w, _ := load.PickWorkloads([]string{"clients-get"})
	attack := func(s *sut, d time.Duration) *load.Outcome {
		a := l.attack(s.addr, w[0], d, cp.Rate)
		a.Workers = cp.Workers
		return a.Run(ctx)
	}
	results := make([]CPUResult, len(entries))
	suts := make([]*sut, len(entries))
	for i, e := range entries {
		results[i] = CPUResult{Test: e.test, Server: e.server}
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
		if l.p.Warmup > 0 {
			attack(s, l.p.Warmup)
		}
		suts[i] = s
	}
	var tps [][]float64 = make([][]float64, len(entries))
	for round := 1; round <= cp.Rounds && ctx.Err() == nil; round++ {
		for i, s := range suts {
			if s == nil || ctx.Err() != nil {
				continue
			}
			pids := s.pids()
			before, err := cpuTime(pids)
			if err != nil {
				results[i].Missing = err.Error()
				suts[i] = nil
				continue
			}
			out := attack(s, cp.Time)
			after, _ := cpuTime(pids)
			if out.OK == 0 {
				results[i].Missing = "no request answered: " + out.FirstErr
				suts[i] = nil
				continue
			}
			per := (after - before) / time.Duration(out.OK)
			results[i].PerReq = append(results[i].PerReq, per)
			results[i].Errors += out.Errors
			tps[i] = append(tps[i], out.TPS())
			log.Printf("  round %d %-5s %-28s %6.1f µs/req  %6.0f req/s  errors %d",
				round, results[i].Test, results[i].Server, us(per), out.TPS(), out.Errors)
		}
	}
	for i := range results {
		slices.Sort(results[i].PerReq)
		if len(tps[i]) > 0 {
			sort.Float64s(tps[i])
			results[i].TPS = tps[i][(len(tps[i])-1)/2]
		}
	}
	return results, ctx.Err()
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// pids are the server's top-level processes (their descendants are found
// when the CPU is read, so NGINX workers respawned meanwhile still count).
func (s *sut) pids() []int {
	var out []int
	for _, pr := range s.procs {
		out = append(out, pr.cmd.Process.Pid)
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
