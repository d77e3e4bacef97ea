// Package lab runs the bench on this machine: it starts the processes
// under test (a private redis-server, the demo upstream, the sidecar in
// each configuration, the peers) on free ports, drives load.Attack runs
// against them, and collects what they measured into Results for the
// report. Every child is stopped when the run ends.
package lab

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sidecache/sidecache/bench/internal/load"
	"github.com/sidecache/sidecache/bench/internal/proc"
	"github.com/sidecache/sidecache/bench/internal/resp"
)

// Lab holds the processes of one bench run: a private redis-server and the
// demo upstream for the whole run, and one server under test at a time.
type Lab struct {
	p     Params
	dir   string
	procs []*proc.Proc

	redisAddr string
	demoAddr  string
	demo      demoClient

	purgeWarned bool
}

// New is a lab for one run; its children keep their logs and files in dir.
func New(p Params, dir string) *Lab {
	return &Lab{p: p, dir: dir}
}

func (l *Lab) start(name string, argv ...string) (*proc.Proc, error) {
	return l.startEnv(name, nil, argv...)
}

// envName is name with each KEY=value of env appended, so the same server
// run with other environment gets files of its own ("bare-GOMAXPROCS1").
func envName(name string, env []string) string {
	for _, kv := range env {
		name += "-" + strings.NewReplacer("=", "", "/", "").Replace(kv)
	}
	return name
}

// startEnv is start with env (KEY=value) added to the bench's environment.
func (l *Lab) startEnv(name string, env []string, argv ...string) (*proc.Proc, error) {
	pr, err := proc.Start(l.dir, name, env, argv...)
	if err != nil {
		return nil, err
	}
	l.procs = append(l.procs, pr)
	return pr, nil
}

// StopAll stops every child still running, newest first.
func (l *Lab) StopAll() {
	for i := len(l.procs) - 1; i >= 0; i-- {
		l.procs[i].Stop()
	}
	l.procs = nil
}

// StartBase starts what every configuration shares: Redis (when a cache
// configuration runs) and the demo upstream.
func (l *Lab) StartBase(ctx context.Context) error {
	if l.p.needsRedis() {
		if err := l.startRedis(ctx); err != nil {
			return err
		}
	}
	port, err := proc.FreePort()
	if err != nil {
		return err
	}
	l.demoAddr = "127.0.0.1:" + itoa(port)
	l.demo = demoClient{base: "http://" + l.demoAddr}
	args := []string{l.p.Demo, "-listen", l.demoAddr,
		"-slots", itoa(l.p.Slots), "-query-time", l.p.QueryTime.String(),
		"-per-row-time", l.p.PerRowTime.String(),
		"-clients", itoa(l.p.Records), "-users", itoa(max(l.p.Users, l.p.Records))}
	if l.p.DemoFramework {
		args = append(args, "-framework")
	}
	pr, err := l.start("demo", args...)
	if err != nil {
		return err
	}
	return pr.WaitReady(ctx, 10*time.Second, httpStatus(l.demo.base+"/_demo/counts", 200))
}

// startRedis starts the run's private redis-server.
func (l *Lab) startRedis(ctx context.Context) error {
	port, err := proc.FreePort()
	if err != nil {
		return err
	}
	l.redisAddr = "127.0.0.1:" + itoa(port)
	pr, err := l.start("redis", "redis-server", "--port", itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", l.dir, "--protected-mode", "no")
	if err != nil {
		return err
	}
	return pr.WaitReady(ctx, 10*time.Second, func(ctx context.Context) error {
		_, err := resp.Do(ctx, l.redisAddr, "PING")
		return err
	})
}

// sut is one server under test.
type sut struct {
	addr  string
	admin string // a sidecar's admin base URL (http://host:port); "" for others
	procs []*proc.Proc
	purge func(ctx context.Context) error // nil: nothing to purge
}

func (l *Lab) stopSUT(s *sut) {
	for _, pr := range s.procs {
		pr.Stop()
	}
}

// startSidecar writes mode's YAML, checks it with -check (so a config
// the sidecar rejects is reported with its own words), and starts it.
func (l *Lab) startSidecar(ctx context.Context, mode, upstream, redis string) (*sut, error) {
	return l.startSidecarBin(ctx, CPUSidecar{Bin: l.p.Sidecache}, mode, upstream, redis)
}

// startSidecarBin is startSidecar with another sidecache binary or
// environment (the CPU table measures a build of an older commit, and the
// current one with other GOMAXPROCS, beside the current one).
func (l *Lab) startSidecarBin(ctx context.Context, sc CPUSidecar, mode, upstream, redis string) (*sut, error) {
	bin := sc.Bin
	ports, err := proc.FreePorts(2)
	if err != nil {
		return nil, err
	}
	sp := sidecarPorts{
		listen:   "127.0.0.1:" + itoa(ports[0]),
		admin:    "127.0.0.1:" + itoa(ports[1]),
		upstream: upstream,
		redis:    redis,
	}
	yaml, err := sidecarYAML(mode, sp)
	if err != nil {
		return nil, err
	}
	name := "sidecache-" + strings.ReplaceAll(mode, "+", "-")
	if bin != l.p.Sidecache {
		name += "-" + filepath.Base(bin)
	}
	name = envName(name, sc.Env) // its config file too: one per process
	path := filepath.Join(l.dir, name+".yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, bin, "-config", path, "-check").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s -check rejected the generated config (%v):\n%s\n--- config ---\n%s", bin, err, out, yaml)
	}
	if redis != "" && mode != "l2-reader" { // the readers read what was stored before they started
		if _, err := resp.Do(ctx, redis, "FLUSHALL"); err != nil {
			return nil, fmt.Errorf("flush redis: %w", err)
		}
	}
	pr, err := l.startEnv(name, sc.Env, bin, "-config", path, "-log-level", "warn")
	if err != nil {
		return nil, err
	}
	s := &sut{addr: sp.listen, procs: []*proc.Proc{pr}}
	if err := pr.WaitReady(ctx, 15*time.Second, httpStatus("http://"+sp.admin+"/readyz", 200)); err != nil {
		l.stopSUT(s)
		return nil, err
	}
	admin := "http://" + sp.admin
	s.admin = admin
	s.purge = func(ctx context.Context) error {
		code, body, err := httpDo(ctx, "POST", admin+"/purge?all=1",
			http.Header{"Authorization": {"Bearer " + sidecarAdminToken}})
		if err == nil && code/100 != 2 {
			err = fmt.Errorf("status %d: %s", code, strings.TrimSpace(string(body)))
		}
		return err
	}
	return s, nil
}

func (l *Lab) startConfig(ctx context.Context, config string) (*sut, error) {
	switch config {
	case "direct":
		return &sut{addr: l.demoAddr}, nil
	case "cache", "cache+batch":
		return l.startSidecar(ctx, config, l.demoAddr, l.redisAddr)
	default:
		return l.startSidecar(ctx, config, l.demoAddr, "")
	}
}

// RunConfig measures every row of one configuration, and its saturation
// steps when -step-configs names it, appending to res.
func (l *Lab) RunConfig(ctx context.Context, config string, res *Results) error {
	log.Printf("configuration %s", config)
	s, err := l.startConfig(ctx, config)
	if err != nil {
		return err
	}
	defer l.stopSUT(s)
	for _, w := range l.p.Rows {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r, err := l.runRow(ctx, config, s, w)
		if err != nil {
			return fmt.Errorf("%s %s: %w", w.Method, w.Endpoint, err)
		}
		res.Rows = append(res.Rows, r)
		log.Printf("  %-6s %-14s %9.0f TPS  avg %-9s p99 %-9s upstream %7.0f/s  errors %d",
			w.Method, w.Endpoint, r.Out.TPS(), ms(r.Out.Latencies.Mean), ms(r.Out.Latencies.P99), r.UpstreamRate(), r.Out.Errors)
	}
	if len(l.p.Steps) > 0 && slices.Contains(l.p.StepConfig, config) {
		if err := l.runSteps(ctx, config, s, res); err != nil {
			return err
		}
	}
	return nil
}

func (l *Lab) keyDist() load.KeyDist {
	d, _ := load.NewKeyDist(l.p.Dist, l.p.Keys) // validated in parseFlags
	return d
}

// clean restores the demo's data and empties the sidecar's cache, so every
// row starts from the same state.
func (l *Lab) clean(ctx context.Context, s *sut) error {
	if err := l.demo.reset(ctx); err != nil {
		return err
	}
	if s.purge != nil {
		if err := s.purge(ctx); err != nil && !l.purgeWarned {
			l.purgeWarned = true
			log.Printf("warning: sidecar purge failed (%v); rows after the first may start with a warm cache", err)
		}
	}
	return nil
}

func (l *Lab) attack(addr string, w load.Workload, d time.Duration, rate int) load.Attack {
	return load.Attack{
		Base: "http://" + addr, Workers: l.p.Workers, Duration: d, Rate: rate,
		Next: w.Make(load.Params{Keys: l.keyDist(), Bulk: l.p.Bulk}),
		OK:   w.OK,
	}
}

// runRow: clean, warm up (fills the cache, opens connections), restore
// the data the warm-up wrote, then measure with the upstream's counters
// read on each side.
func (l *Lab) runRow(ctx context.Context, config string, s *sut, w load.Workload) (RowResult, error) {
	if err := l.clean(ctx, s); err != nil {
		return RowResult{}, err
	}
	if l.p.Warmup > 0 {
		l.attack(s.addr, w, l.p.Warmup, 0).Run(ctx)
	}
	if err := l.demo.reset(ctx); err != nil {
		return RowResult{}, err
	}
	before, err := l.demo.counts(ctx)
	if err != nil {
		return RowResult{}, err
	}
	out := l.attack(s.addr, w, l.p.Duration, 0).Run(ctx)
	after, err := l.demo.counts(ctx)
	if err != nil {
		return RowResult{}, err
	}
	total, per := upstreamDelta(before, after)
	return RowResult{Config: config, Workload: w, Out: out, Upstream: total, UpstreamPer: per}, nil
}

// runSteps is the saturation table: open-loop load at rising rates on
// GET /users/{id}; latency counts from when each request was due.
func (l *Lab) runSteps(ctx context.Context, config string, s *sut, res *Results) error {
	w, _ := load.PickWorkloads([]string{"users-get"})
	if err := l.clean(ctx, s); err != nil {
		return err
	}
	if l.p.Warmup > 0 {
		l.attack(s.addr, w[0], l.p.Warmup, 0).Run(ctx)
	}
	for _, rate := range l.p.Steps {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		before, err := l.demo.counts(ctx)
		if err != nil {
			return err
		}
		out := l.attack(s.addr, w[0], l.p.StepTime, rate).Run(ctx)
		after, err := l.demo.counts(ctx)
		if err != nil {
			return err
		}
		total, _ := upstreamDelta(before, after)
		st := StepResult{Config: config, Offered: rate, Out: out, Upstream: total}
		res.Steps = append(res.Steps, st)
		log.Printf("  step %6d/s → %8.0f/s  p95 %-9s p99 %-9s errors %d dropped %d",
			rate, out.TPS(), ms(out.Latencies.P95), ms(out.Latencies.P99), out.Errors, out.Dropped)
	}
	return nil
}

// prefill requests every key once so the hit runs start all cached.
func prefill(ctx context.Context, addr, prefix string, keys int) error {
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for id := range next {
				code, _, err := httpDo(ctx, "GET", "http://"+addr+prefix+strconv.Itoa(id), nil)
				if err == nil && code != 200 {
					err = fmt.Errorf("GET %s%d: status %d", prefix, id, code)
				}
				if err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			}
		})
	}
	for id := 1; id <= keys; id++ {
		next <- id
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errc:
		return fmt.Errorf("prefill: %w", err)
	default:
		return nil
	}
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + "ms"
}
