// Command bench measures sidecache against its own upstream and against
// its peers, and writes a Markdown report with a PNG chart.
//
//	make bench         # bin/bench -out bench/results (≈ 10 min)
//	make bench-quick   # BENCH_QUICK=1 bin/bench -out bin/bench-quick (under 2 min)
//
// It is its own module (bench/go.mod), so vegeta stays out of the sidecar's
// requirements; make builds it to bin/bench and runs it from the repo root.
//
// It needs bin/demo-upstream and, for every configuration but "direct",
// bin/sidecache (make build), redis-server on PATH for the L2
// configurations, and optionally nginx and varnishd for the peers table.
// Everything runs on this machine on free ports and is stopped at the end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sidecache/sidecache/bench/internal/fleet"
	"github.com/sidecache/sidecache/bench/internal/lab"
	"github.com/sidecache/sidecache/bench/internal/load"
	"github.com/sidecache/sidecache/bench/internal/report"
)

// options are the flags: the run's lab.Params, plus what only main uses.
type options struct {
	lab.Params
	Out string
	// PrintConfig, when set, names a configuration whose sidecar YAML
	// is printed (on fixed local ports) instead of running the bench,
	// to rerun a cell by hand with `go tool vegeta attack`.
	PrintConfig string
	// CPU runs only the CPU-per-request table (lab.RunCPU).
	CPU     bool
	CPUOpts lab.CPUParams
	// Fleet runs only the fleet coherence table (fleet.Run).
	Fleet      fleet.Params
	FleetLabel string
	// Restart runs only the reconnection measurement (fleet.RunRestart)
	// when Restart.Real > 0.
	Restart fleet.RestartParams
}

func main() {
	log.SetFlags(log.Ltime)
	log.SetPrefix("bench: ")
	// The bare Go peer is this same binary in another mode, so it runs as
	// its own process like every other server under test.
	if len(os.Args) > 2 && os.Args[1] == "-serve-bare" {
		if err := lab.ServeBare(os.Args[2], os.Args[3:]); err != nil {
			log.Fatal(err)
		}
		return
	}
	if len(os.Args) > 2 && os.Args[1] == "-serve-fasthit" {
		if err := lab.ServeFastHit(os.Args[2], os.Args[3:]); err != nil {
			log.Fatal(err)
		}
		return
	}
	p, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if p.PrintConfig != "" {
		if err := lab.PrintConfig(os.Stdout, p.PrintConfig); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := run(ctx, p)
	if err != nil {
		log.Print(err)
	}
	os.Exit(code)
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var p options
	configNames := lab.ConfigNames()
	var configs, rows, peers, steps, stepConfigs string
	fs.StringVar(&p.Out, "out", "bench/results", "report `dir`")
	fs.DurationVar(&p.Duration, "duration", 10*time.Second, "measured time per row")
	fs.DurationVar(&p.Warmup, "warmup", 2*time.Second, "unmeasured load before each row")
	fs.IntVar(&p.Workers, "workers", 200, "concurrent connections, each sending as fast as it is answered")
	fs.IntVar(&p.Workers, "max-workers", 200, "alias of -workers (vegeta's name)")
	fs.IntVar(&p.Keys, "keys", 1000, "IDs drawn from 1..keys")
	fs.StringVar(&p.Dist, "dist", "uniform", "key distribution: uniform or zipf (s=1.1)")
	fs.IntVar(&p.Bulk, "bulk", 20, "IDs per GET /users?ids=… request")
	fs.StringVar(&configs, "configs", strings.Join(configNames, ","), "configurations to run")
	fs.StringVar(&rows, "rows", load.DefaultWorkloads, "rows per configuration (also: self, clients-list)")
	fs.StringVar(&peers, "peers", "sidecache,nginx,varnish,bare", "peers table entries; empty to skip the peers")
	fs.StringVar(&steps, "steps", "250,500,1000,2000,4000,8000,16000", "open-loop rates (req/s) of the saturation table; empty to skip")
	fs.StringVar(&stepConfigs, "step-configs", "direct,cache+batch", "configurations stepped for the saturation table")
	fs.IntVar(&p.PeerRounds, "peer-rounds", 3, "interleaved rounds per peer; the median is reported")
	fs.StringVar(&p.PrintConfig, "print-config", "", "print the sidecar YAML of this `configuration` (listen :8080, admin :9090, upstream :3000, redis :6379 on 127.0.0.1) and exit")
	fs.BoolVar(&p.CPU, "cpu", false, "measure only CPU µs per request (hit and pass-through) at a fixed -cpu-rate; writes CPU-<stamp>.md and cpu-latest.md under -out")
	fs.IntVar(&p.CPUOpts.Rate, "cpu-rate", 3000, "-cpu: open-loop req/s, below every server's saturation")
	fs.IntVar(&p.CPUOpts.Workers, "cpu-workers", 64, "-cpu: connections of the load generator")
	fs.IntVar(&p.CPUOpts.SplitRate, "cpu-split-rate", 300, "-cpu: open-loop req/s of the split row (-bulk ids each)")
	var cpuSidecars, cpuRows string
	fs.StringVar(&cpuRows, "cpu-rows", strings.Join(lab.CPURows(), ","), "-cpu: rows to measure (hit: L1 hit and peers; pass: pass-through and peers; batch: batched misses, on a sidecar whose L1 fills all run (256 MiB, purged each round) and on one whose L1 is full and evicting (32 MiB, warmed with cold ids first), and bare Go at GOMAXPROCS=1 batching the same ids then serving them from memory (the floor); split: GET /users?ids=… half cached; l2: L2 hit with Redis's CPU, bare Go at GOMAXPROCS=1 with one Redis GET per request, and a plain GET beside it)")
	fs.StringVar(&cpuSidecars, "cpu-sidecars", "", "-cpu: more sidecache binaries to measure, `name=path [KEY=value ...],...` (e.g. before=bin/sidecache-79708f5, or 'pod=bin/sidecache GOMEMLIMIT=241591910': the same binary with that environment)")
	fs.BoolVar(&p.Quick, "quick", os.Getenv("BENCH_QUICK") == "1", "shrink everything to finish in under 2 minutes (also BENCH_QUICK=1)")
	fs.StringVar(&p.Sidecache, "sidecache", "bin/sidecache", "sidecar binary")
	fs.StringVar(&p.Demo, "demo", "bin/demo-upstream", "demo upstream binary")
	fs.IntVar(&p.Slots, "slots", 10, "demo: concurrent queries")
	fs.DurationVar(&p.QueryTime, "query-time", 5*time.Millisecond, "demo: time per query")
	fs.DurationVar(&p.PerRowTime, "per-row-time", 50*time.Microsecond, "demo: extra time per row of a bulk query")
	fs.IntVar(&p.Records, "records", 10000, "demo: clients and users")
	var fleetNs string
	fs.StringVar(&fleetNs, "fleet", "", "measure only coherence across a fleet: emulated peers per row, `N,...` (e.g. 10,200,1000); writes FLEET-<stamp>-<protocol>.md under -out")
	fs.IntVar(&p.Fleet.Real, "fleet-real", 3, "-fleet: real sidecache replicas beside the emulated peers")
	fs.StringVar(&p.Fleet.Protocol, "fleet-protocol", fleet.ProtocolOwn, "-fleet: the emulated peers' heartbeats: own (this release), shared (16d946c and before) or ping (a PING on the subscription connection: the alternative not taken)")
	fs.IntVar(&p.Fleet.Relays, "fleet-relays", 0, "-fleet: read replicas of the Redis master carrying every subscription (the relay tier, cache.l2.redis.subscribe_addrs); 0: all on the master")
	fs.BoolVar(&p.Fleet.RelayHub, "fleet-relay-hub", false, "-fleet-relays: the relays replicate from one more read replica (a hub, no subscriptions) instead of the master")
	fs.IntVar(&p.Fleet.Writes, "fleet-writes", 20, "-fleet: invalidations/s in the write phase")
	fs.DurationVar(&p.Fleet.Phase, "fleet-phase", 8*time.Second, "-fleet: length of the idle and of the write phase")
	fs.DurationVar(&p.Fleet.MaxLag, "fleet-max-lag", time.Second, "-fleet: coherence.max_lag")
	fs.IntVar(&p.Restart.Real, "fleet-restart", 0, "measure only how `R` real replicas reading from cache recover from a Redis stop (writes RESTART-<stamp>-<mode>.md under -out)")
	fs.StringVar(&p.Restart.Mode, "fleet-restart-mode", fleet.RestartPause, "-fleet-restart: pause (SIGSTOP/SIGCONT, data kept) or kill (restarted empty)")
	fs.DurationVar(&p.Restart.Stop, "fleet-stop", 5*time.Second, "-fleet-restart: how long Redis does not answer")
	fs.DurationVar(&p.Restart.After, "fleet-after", 8*time.Second, "-fleet-restart: how long reads go on after Redis answers again")
	fs.IntVar(&p.Restart.Keys, "fleet-keys", 10, "-fleet-restart: keys each replica reads, round robin")
	fs.IntVar(&p.Restart.Rate, "fleet-rate", 20, "-fleet-restart: reads a second per replica")
	fs.StringVar(&p.FleetLabel, "fleet-label", "this tree", "-fleet: what -sidecache is, for the report (e.g. a commit)")
	fs.BoolVar(&p.DemoFramework, "demo-framework", false, "demo: answer as a framework's defaults would (demo-upstream -framework: Vary: Accept-Encoding, gzip over 1 KiB, weak ETags)")
	if err := fs.Parse(args); err != nil {
		return p, err
	}
	for _, s := range splitList(fleetNs) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return p, fmt.Errorf("bad peer count %q in -fleet", s)
		}
		p.Fleet.Ns = append(p.Fleet.Ns, n)
	}
	if p.Fleet.Protocol != fleet.ProtocolOwn && p.Fleet.Protocol != fleet.ProtocolShared && p.Fleet.Protocol != fleet.ProtocolPing {
		return p, fmt.Errorf("-fleet-protocol %q: want own, shared or ping", p.Fleet.Protocol)
	}
	if p.Quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		shrink := func(name string, apply func()) {
			if !set[name] {
				apply()
			}
		}
		shrink("duration", func() { p.Duration = time.Second })
		shrink("warmup", func() { p.Warmup = 400 * time.Millisecond })
		shrink("workers", func() { p.Workers = 64 })
		shrink("keys", func() { p.Keys = 200 })
		shrink("steps", func() { steps = "" })
		shrink("peer-rounds", func() { p.PeerRounds = 1 })
	}
	p.StepTime = max(p.Duration/2, time.Second)
	var err error
	if p.CPUOpts.Extra, err = lab.ParseCPUSidecars(cpuSidecars); err != nil {
		return p, err
	}
	p.CPUOpts.Time, p.CPUOpts.Rounds = p.Duration, p.PeerRounds
	if p.CPU && (p.CPUOpts.Rate < 1 || p.CPUOpts.SplitRate < 1 || p.CPUOpts.Workers < 1) {
		return p, errors.New("need -cpu-rate >= 1, -cpu-split-rate >= 1 and -cpu-workers >= 1")
	}
	for _, r := range splitList(cpuRows) {
		if !slices.Contains(lab.CPURows(), r) {
			return p, fmt.Errorf("unknown row %q in -cpu-rows (known: %s)", r, strings.Join(lab.CPURows(), ","))
		}
		p.CPUOpts.Rows = append(p.CPUOpts.Rows, r)
	}
	if p.CPU && len(p.CPUOpts.Rows) == 0 {
		return p, errors.New("-cpu-rows is empty")
	}
	if p.Rows, err = load.PickWorkloads(splitList(rows)); err != nil {
		return p, err
	}
	for _, c := range splitList(configs) {
		if !slices.Contains(configNames, c) {
			return p, fmt.Errorf("unknown configuration %q in -configs (known: %s)", c, strings.Join(configNames, ","))
		}
		p.Configs = append(p.Configs, c)
	}
	for _, c := range splitList(peers) {
		if !slices.Contains([]string{"sidecache", "nginx", "varnish", "bare"}, c) {
			return p, fmt.Errorf("unknown peer %q in -peers (known: sidecache,nginx,varnish,bare)", c)
		}
		p.Peers = append(p.Peers, c)
	}
	for _, s := range splitList(steps) {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return p, fmt.Errorf("bad rate %q in -steps", s)
		}
		p.Steps = append(p.Steps, n)
	}
	p.StepConfig = splitList(stepConfigs)
	if _, err := load.NewKeyDist(p.Dist, p.Keys); err != nil {
		return p, err
	}
	if p.Keys < 1 || p.Keys > p.Records || p.Workers < 1 || p.Bulk < 1 || p.Duration <= 0 || p.PeerRounds < 1 {
		return p, errors.New("need 1 <= -keys <= -records, -workers >= 1, -bulk >= 1, -duration > 0, -peer-rounds >= 1")
	}
	return p, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func run(ctx context.Context, p options) (int, error) {
	if p.CPU {
		return runCPU(ctx, p)
	}
	if p.Restart.Real > 0 {
		return runRestart(ctx, p)
	}
	if len(p.Fleet.Ns) > 0 {
		return runFleet(ctx, p)
	}
	if err := lab.Preflight(p.Params); err != nil {
		return 2, err
	}
	dir, err := os.MkdirTemp("", "sidecache-bench-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)
	l := lab.New(p.Params, dir)
	defer l.StopAll()
	if err := l.StartBase(ctx); err != nil {
		return 1, err
	}
	rep := &report.Report{Params: p.Params, Started: time.Now(), Machine: report.MachineInfo(),
		Results: lab.Results{Failed: map[string]string{}}}
	failed := false
	for _, c := range p.Configs {
		if ctx.Err() != nil {
			break
		}
		if err := l.RunConfig(ctx, c, &rep.Results); err != nil {
			log.Printf("%s: %v", c, err)
			rep.Failed[c] = err.Error()
			failed = true
		}
	}
	if len(p.Peers) > 0 && ctx.Err() == nil {
		l.RunPeers(ctx, &rep.Results)
	}
	if ctx.Err() != nil {
		return 130, ctx.Err()
	}
	paths, err := rep.Write(p.Out)
	if err != nil {
		return 1, err
	}
	log.Printf("report: %s", strings.Join(paths, ", "))
	if failed {
		return 1, errors.New("some configurations failed; see the report")
	}
	return 0, nil
}

// runCPU is the -cpu mode: the demo upstream (no Redis), then lab.RunCPU.
func runCPU(ctx context.Context, p options) (int, error) {
	p.Configs, p.Peers = nil, []string{"sidecache"} // what Preflight and StartBase need
	for _, e := range p.CPUOpts.Extra {
		if _, err := os.Stat(e.Bin); err != nil {
			return 2, fmt.Errorf("-cpu-sidecars %s: %w", e.Name, err)
		}
	}
	if err := lab.Preflight(p.Params); err != nil {
		return 2, err
	}
	if slices.Contains(p.CPUOpts.Rows, "l2") {
		if _, err := exec.LookPath("redis-server"); err != nil {
			return 2, errors.New("redis-server not on PATH: the l2 row needs it (apt-get install redis-server), or leave l2 out of -cpu-rows")
		}
	}
	if slices.Contains(p.CPUOpts.Rows, "batch") || slices.Contains(p.CPUOpts.Rows, "split") {
		p.Users = lab.ColdUsers // misses on ids never asked before
	}
	dir, err := os.MkdirTemp("", "sidecache-bench-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)
	l := lab.New(p.Params, dir)
	defer l.StopAll()
	if err := l.StartBase(ctx); err != nil {
		return 1, err
	}
	rep := &report.CPUReport{Params: p.Params, CPU: p.CPUOpts, Started: time.Now(), Machine: report.MachineInfo(),
		Command: commandLine(os.Args[1:])}
	if rep.Results, err = l.RunCPU(ctx, p.CPUOpts); err != nil {
		return 1, err
	}
	paths, err := rep.Write(p.Out)
	if err != nil {
		return 1, err
	}
	fmt.Print(rep.Markdown())
	log.Printf("report: %s", strings.Join(paths, ", "))
	return 0, nil
}

// runRestart is the -fleet-restart mode: fleet.RunRestart, then its report.
func runRestart(ctx context.Context, p options) (int, error) {
	if _, err := os.Stat(p.Sidecache); err != nil {
		return 2, fmt.Errorf("-sidecache: %w", err)
	}
	if p.Restart.Mode != fleet.RestartPause && p.Restart.Mode != fleet.RestartKill {
		return 2, fmt.Errorf("-fleet-restart-mode %q: want pause or kill", p.Restart.Mode)
	}
	dir, err := os.MkdirTemp("", "sidecache-restart-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)
	p.Restart.Sidecache, p.Restart.Dir, p.Restart.MaxLag = p.Sidecache, dir, p.Fleet.MaxLag
	p.Restart.Keys = max(p.Restart.Keys, 1)
	started, command := time.Now(), commandLine(os.Args[1:])
	var load [2]string
	load[0] = fleet.LoadAvg()
	res := fleet.RunRestart(ctx, p.Restart)
	load[1] = fleet.LoadAvg()
	if ctx.Err() != nil {
		return 130, ctx.Err()
	}
	path, err := res.Write(p.Out, command, p.FleetLabel, started, load)
	if err != nil {
		return 1, err
	}
	fmt.Print(res.Markdown(command, p.FleetLabel, started, load))
	log.Printf("report: %s", path)
	if res.Err != "" {
		return 1, errors.New(res.Err)
	}
	return 0, nil
}

// runFleet is the -fleet mode: fleet.Run, then its report.
func runFleet(ctx context.Context, p options) (int, error) {
	if _, err := os.Stat(p.Sidecache); err != nil {
		return 2, fmt.Errorf("-sidecache: %w", err)
	}
	dir, err := os.MkdirTemp("", "sidecache-fleet-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)
	p.Fleet.Sidecache, p.Fleet.Dir = p.Sidecache, dir
	rep := &fleet.Report{Params: p.Fleet, Label: p.FleetLabel, Started: time.Now(),
		Command: commandLine(os.Args[1:])}
	rep.LoadAvg[0] = fleet.LoadAvg()
	rep.Rows = fleet.Run(ctx, p.Fleet)
	rep.LoadAvg[1] = fleet.LoadAvg()
	if ctx.Err() != nil {
		return 130, ctx.Err()
	}
	path, err := rep.Write(p.Out)
	if err != nil {
		return 1, err
	}
	fmt.Print(rep.Markdown())
	log.Printf("report: %s", path)
	return 0, nil
}

// commandLine is the bench's command as a shell would take it back: an
// argument with a space (-cpu-sidecars 'pod=bin/sidecache GOMEMLIMIT=…')
// is quoted, so a report's command can be pasted.
func commandLine(argv []string) string {
	args := []string{"bench"}
	for _, a := range argv {
		if strings.ContainsAny(a, " \t'\"") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
}
