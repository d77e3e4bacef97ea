// Command bench measures sidecache against its own upstream and against
// its peers, and writes a Markdown report with a PNG chart (issue 5).
//
//	go run ./bench/cmd/bench -out bench/results          # make bench (≈ 10 min)
//	BENCH_QUICK=1 go run ./bench/cmd/bench -out bench/results   # under 2 min
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
	"strconv"
	"strings"
	"syscall"
	"time"
)

type params struct {
	Out        string
	Duration   time.Duration
	Warmup     time.Duration
	Workers    int
	Keys       int
	Dist       string
	Bulk       int
	Configs    []string
	Rows       []workload
	Peers      []string
	Steps      []int
	StepTime   time.Duration
	StepConfig []string
	Quick      bool
	PeerRounds int
	// PrintConfig, when set, names a configuration whose sidecar YAML
	// is printed (on fixed local ports) instead of running the bench,
	// to rerun a cell by hand with `go tool vegeta attack`.
	PrintConfig string

	Sidecache  string
	Demo       string
	Slots      int
	QueryTime  time.Duration
	PerRowTime time.Duration
	Records    int // clients = users in the demo
}

func main() {
	log.SetFlags(log.Ltime)
	log.SetPrefix("bench: ")
	// The bare Go peer is this same binary in another mode, so it runs as
	// its own process like every other server under test.
	if len(os.Args) > 2 && os.Args[1] == "-serve-bare" {
		if err := serveBare(os.Args[2], os.Args[3:]); err != nil {
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
		if err := printConfig(os.Stdout, p.PrintConfig); err != nil {
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

func parseFlags(args []string) (params, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var p params
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
	fs.StringVar(&rows, "rows", defaultWorkloads, "rows per configuration (also: self, clients-list)")
	fs.StringVar(&peers, "peers", "sidecache,nginx,varnish,bare", "peers table entries; empty to skip the peers")
	fs.StringVar(&steps, "steps", "250,500,1000,2000,4000,8000,16000", "open-loop rates (req/s) of the saturation table; empty to skip")
	fs.StringVar(&stepConfigs, "step-configs", "direct,cache+batch", "configurations stepped for the saturation table")
	fs.IntVar(&p.PeerRounds, "peer-rounds", 3, "interleaved rounds per peer; the median is reported")
	fs.StringVar(&p.PrintConfig, "print-config", "", "print the sidecar YAML of this `configuration` (listen :8080, admin :9090, upstream :3000, redis :6379 on 127.0.0.1) and exit")
	fs.BoolVar(&p.Quick, "quick", os.Getenv("BENCH_QUICK") == "1", "shrink everything to finish in under 2 minutes (also BENCH_QUICK=1)")
	fs.StringVar(&p.Sidecache, "sidecache", "bin/sidecache", "sidecar binary")
	fs.StringVar(&p.Demo, "demo", "bin/demo-upstream", "demo upstream binary")
	fs.IntVar(&p.Slots, "slots", 10, "demo: concurrent queries")
	fs.DurationVar(&p.QueryTime, "query-time", 5*time.Millisecond, "demo: time per query")
	fs.DurationVar(&p.PerRowTime, "per-row-time", 50*time.Microsecond, "demo: extra time per row of a bulk query")
	fs.IntVar(&p.Records, "records", 10000, "demo: clients and users")
	if err := fs.Parse(args); err != nil {
		return p, err
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
	if p.Rows, err = pickWorkloads(rows); err != nil {
		return p, err
	}
	for _, c := range splitList(configs) {
		if !known(configNames, c) {
			return p, fmt.Errorf("unknown configuration %q in -configs (known: %s)", c, strings.Join(configNames, ","))
		}
		p.Configs = append(p.Configs, c)
	}
	for _, c := range splitList(peers) {
		if !known([]string{"sidecache", "nginx", "varnish", "bare"}, c) {
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
	if _, err := newKeyDist(p.Dist, p.Keys); err != nil {
		return p, err
	}
	if p.Keys < 1 || p.Keys > p.Records || p.Workers < 1 || p.Bulk < 1 || p.Duration <= 0 || p.PeerRounds < 1 {
		return p, errors.New("need 1 <= -keys <= -records, -workers >= 1, -bulk >= 1, -duration > 0, -peer-rounds >= 1")
	}
	return p, nil
}

func known(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// needsSidecar reports whether the run needs bin/sidecache.
func (p params) needsSidecar() bool {
	for _, c := range p.Configs {
		if c != "direct" {
			return true
		}
	}
	return known(p.Peers, "sidecache")
}

func (p params) needsRedis() bool {
	return known(p.Configs, "cache") || known(p.Configs, "cache+batch")
}

// preflight fails before anything starts, naming what is missing.
func preflight(p params) error {
	var errs []error
	if _, err := os.Stat(p.Demo); err != nil {
		errs = append(errs, fmt.Errorf("%s not found: build it with `go build -o %s ./cmd/demo-upstream` (or `make build`)", p.Demo, p.Demo))
	}
	if p.needsSidecar() {
		if _, err := os.Stat(p.Sidecache); err != nil {
			errs = append(errs, fmt.Errorf("%s not found: build it with `go build -o %s ./cmd/sidecache` (or `make build`); "+
				"to measure without the sidecar: -configs direct -peers nginx,varnish,bare -step-configs direct", p.Sidecache, p.Sidecache))
		}
	}
	if p.needsRedis() {
		if _, err := exec.LookPath("redis-server"); err != nil {
			errs = append(errs, errors.New("redis-server not on PATH: the cache configurations need it for L2 (apt-get install redis-server)"))
		}
	}
	return errors.Join(errs...)
}

func run(ctx context.Context, p params) (int, error) {
	if err := preflight(p); err != nil {
		return 2, err
	}
	dir, err := os.MkdirTemp("", "sidecache-bench-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)
	l := &lab{p: p, dir: dir}
	defer l.stopAll()
	if err := l.startBase(ctx); err != nil {
		return 1, err
	}
	rep := &report{Params: p, Started: time.Now(), Machine: machineInfo(), Configs: map[string]string{}}
	failed := false
	for _, c := range p.Configs {
		if ctx.Err() != nil {
			break
		}
		if err := l.runConfig(ctx, c, rep); err != nil {
			log.Printf("%s: %v", c, err)
			rep.Configs[c] = err.Error()
			failed = true
		}
	}
	if len(p.Peers) > 0 && ctx.Err() == nil {
		l.runPeers(ctx, rep)
	}
	if ctx.Err() != nil {
		return 130, ctx.Err()
	}
	paths, err := rep.write(p.Out)
	if err != nil {
		return 1, err
	}
	log.Printf("report: %s", strings.Join(paths, ", "))
	if failed {
		return 1, errors.New("some configurations failed; see the report")
	}
	return 0, nil
}
