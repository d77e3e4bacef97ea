package fleet

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sidecache/sidecache/bench/internal/proc"
)

// The -fleet-restart mode: the reconnection storm of issue 25 item 3. Many
// real replicas read from their caches while Redis stops for a few seconds
// (paused with SIGSTOP, or killed and restarted empty); the bench measures,
// per replica, when its reads are all hits again after Redis answers, and
// how many fetches the upstream took meanwhile. Before the backoff and the
// L1 floor, a 5 s stop at 50 replicas brought the first hits back at p50
// 3.4 s in one run and 16.9 s in another, with 8,241 upstream fetches.

// Restart modes.
const (
	RestartPause = "pause" // SIGSTOP, then SIGCONT: Redis keeps its data
	RestartKill  = "kill"  // SIGKILL, then a new redis-server on the same port: data lost
)

// RestartParams configure a -fleet-restart run.
type RestartParams struct {
	Real      int           // real replicas
	Sidecache string        // their binary
	MaxLag    time.Duration // coherence.max_lag
	Stop      time.Duration // how long Redis does not answer
	Mode      string        // RestartPause or RestartKill
	Keys      int           // keys each replica reads, round robin
	Rate      int           // reads a second per replica
	After     time.Duration // how long reads go on after Redis answers again
	Dir       string
}

// RestartResult is what a run measured.
type RestartResult struct {
	Params RestartParams
	// Recovered is, per replica, how long after Redis answered again its
	// last miss was sent (0: no miss after it): from then on every read was
	// a hit. Sorted.
	Recovered []time.Duration
	// FirstHit is, per replica, how long after Redis answered again its
	// first hit was sent (entries fetched while Redis was away and younger
	// than max_lag are hits without a proof). Sorted.
	FirstHit []time.Duration
	// Hits and reads per stage: before the stop, during it, after it.
	Reads, Hits [3]int64
	// Fetches the upstream took in each stage.
	Fetches [3]int64
	Errors  int64
	Err     string
}

// RunRestart runs one -fleet-restart measurement.
func RunRestart(ctx context.Context, p RestartParams) (res RestartResult) {
	res.Params = p
	if err := runRestart(ctx, p, &res); err != nil {
		res.Err = err.Error()
	}
	return res
}

func runRestart(ctx context.Context, p RestartParams, res *RestartResult) error {
	// The upstream's listener is bound before the other ports are chosen,
	// and those are chosen all at once, so no two of them collide.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	ports, err := proc.FreePorts(1 + 2*p.Real)
	if err != nil {
		return err
	}
	port := ports[0]
	addr := "127.0.0.1:" + strconv.Itoa(port)
	startRedis := func(name string) (*proc.Proc, error) {
		rs, err := proc.Start(p.Dir, name, nil, "redis-server", "--port", strconv.Itoa(port),
			"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "no",
			"--maxclients", strconv.Itoa(20*p.Real+100), "--dir", p.Dir)
		if err != nil {
			return nil, err
		}
		if err := until(ctx, 10*time.Second, func() error { _, err := redisDo(ctx, addr, "PING"); return err }); err != nil {
			rs.Stop()
			return nil, fmt.Errorf("redis: %w", err)
		}
		return rs, nil
	}
	rs, err := startRedis("redis-restart")
	if err != nil {
		return err
	}
	defer func() { rs.Stop() }()

	// The upstream: a constant body per key, counting fetches by stage.
	var stage atomic.Int32
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt64(&res.Fetches[stage.Load()], 1)
		fmt.Fprintf(w, `{"key":%q}`, r.URL.Path)
	})}
	go func() { _ = up.Serve(ln) }()
	defer up.Close()

	var replicas []*proc.Proc
	var listens []string
	defer func() {
		for _, c := range replicas {
			c.Stop()
		}
	}()
	for i := range p.Real {
		c, listen, err := startReadReplica(p, addr, ln.Addr().String(), fmt.Sprintf("restart-replica-%d", i), ports[1+2*i:3+2*i])
		if err != nil {
			return err
		}
		replicas = append(replicas, c)
		listens = append(listens, listen)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	get := func(listen string, key int) (hit bool, err error) {
		resp, err := client.Get(fmt.Sprintf("http://%s/k/%d", listen, key))
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("status %d", resp.StatusCode)
		}
		cs := resp.Header.Get("Cache-Status")
		return strings.Contains(cs, "hit") && !strings.Contains(cs, "fwd="), nil
	}
	for _, l := range listens {
		if err := until(ctx, 30*time.Second, func() error { _, err := get(l, 0); return err }); err != nil {
			return fmt.Errorf("replica %s: %w", l, err)
		}
	}
	time.Sleep(p.MaxLag) // every replica's proof established

	var answered atomic.Int64 // unix ns when Redis answered again; 0 before
	lastMiss := make([]atomic.Int64, p.Real)
	firstHit := make([]atomic.Int64, p.Real)
	rctx, stopReads := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, l := range listens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(time.Second / time.Duration(max(p.Rate, 1)))
			defer t.Stop()
			for k := 0; ; k++ {
				select {
				case <-rctx.Done():
					return
				case <-t.C:
				}
				sent, st := time.Now(), stage.Load()
				hit, err := get(l, k%p.Keys)
				atomic.AddInt64(&res.Reads[st], 1)
				switch {
				case err != nil:
					atomic.AddInt64(&res.Errors, 1)
				case hit:
					atomic.AddInt64(&res.Hits[st], 1)
					if a := answered.Load(); st == 2 && a > 0 && sent.UnixNano() >= a {
						firstHit[i].CompareAndSwap(0, sent.UnixNano()-a)
					}
				case st == 2:
					if a := answered.Load(); a > 0 && sent.UnixNano() >= a {
						lastMiss[i].Store(sent.UnixNano() - a)
					}
				}
			}
		}()
	}
	sleep(ctx, 2*time.Second+p.MaxLag) // every key fetched, then hits

	stage.Store(1)
	pid := rs.Pid()
	switch p.Mode {
	case RestartKill:
		rs.Kill()
		sleep(ctx, p.Stop)
		if rs, err = startRedis("redis-restart-2"); err != nil {
			stopReads()
			wg.Wait()
			return err
		}
	default:
		_ = syscall.Kill(pid, syscall.SIGSTOP)
		sleep(ctx, p.Stop)
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	answered.Store(time.Now().UnixNano())
	stage.Store(2)
	sleep(ctx, p.After)
	stopReads()
	wg.Wait()
	for i := range lastMiss {
		res.Recovered = append(res.Recovered, time.Duration(lastMiss[i].Load()))
		res.FirstHit = append(res.FirstHit, time.Duration(firstHit[i].Load()))
	}
	slices.Sort(res.Recovered)
	slices.Sort(res.FirstHit)
	return nil
}

// startReadReplica runs one real sidecache that caches GET /k/{id} for an
// hour on L1 and the shared Redis; it returns its listen address.
func startReadReplica(p RestartParams, redisAddr, upstream, name string, ports []int) (*proc.Proc, string, error) {
	listen := "127.0.0.1:" + strconv.Itoa(ports[0])
	yaml := fmt.Sprintf(`listen: %s
admin:
  listen: 127.0.0.1:%d
  token: fleet
upstream:
  url: http://%s
cache:
  l2:
    redis:
      addrs: [%s]
coherence:
  max_lag: %s
routes:
  - name: k
    methods: [GET]
    path: /k/{id:[0-9]+}
    ttl: 1h
    tags: ["k:{id}"]
`, listen, ports[1], upstream, redisAddr, p.MaxLag)
	path := filepath.Join(p.Dir, name+".yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		return nil, "", err
	}
	c, err := proc.Start(p.Dir, name, nil, p.Sidecache, "-config", path, "-log-level", "warn")
	if err != nil {
		return nil, "", err
	}
	return c, listen, nil
}

// Markdown renders the result.
func (r RestartResult) Markdown(command, label string, started time.Time, load [2]string) string {
	var b strings.Builder
	p := r.Params
	what := map[string]string{RestartPause: "paused (SIGSTOP, data kept)", RestartKill: "killed and restarted empty"}[p.Mode]
	fmt.Fprintf(&b, "# Fleet restart — %s: %d replicas, Redis %s for %s\n\n", label, p.Real, what, p.Stop)
	fmt.Fprintf(&b, "`%s` — %s, load average %s before, %s after.\n\n", command, started.UTC().Format("2006-01-02 15:04 UTC"), load[0], load[1])
	fmt.Fprintf(&b, "%d real replicas (`coherence.max_lag` %s) on one redis-server, each reading %d keys round robin at %d reads/s "+
		"(every key cached in L1 and L2 first). Redis is then %s for %s; reads go on for %s after it answers again.\n\n",
		p.Real, p.MaxLag, p.Keys, p.Rate, what, p.Stop, p.After)
	if r.Err != "" {
		fmt.Fprintf(&b, "**Error:** %s\n\n", r.Err)
	}
	b.WriteString("| stage | reads | hits | upstream fetches |\n|---|---:|---:|---:|\n")
	for i, s := range []string{"before the stop", "Redis not answering", "after Redis answers"} {
		ratio := "—"
		if r.Reads[i] > 0 {
			ratio = fmt.Sprintf("%d (%.1f %%)", r.Hits[i], 100*float64(r.Hits[i])/float64(r.Reads[i]))
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %d |\n", s, r.Reads[i], ratio, r.Fetches[i])
	}
	fmt.Fprintf(&b, "\nErrors (transport or non-200): %d.\n\n", r.Errors)
	if n := len(r.Recovered); n > 0 {
		q := func(f float64) time.Duration { return r.Recovered[min(int(f*float64(n)), n-1)] }
		within := 0
		for _, d := range r.Recovered {
			if d <= p.MaxLag+time.Second {
				within++
			}
		}
		fmt.Fprintf(&b, "Every read a hit again (the replica's last miss, after Redis answered): p50 %s, p90 %s, max %s; "+
			"%d of %d replicas within `max_lag` + 1 s (%s).\n",
			q(0.5).Round(time.Millisecond), q(0.9).Round(time.Millisecond), r.Recovered[n-1].Round(time.Millisecond),
			within, n, (p.MaxLag + time.Second))
		fmt.Fprintf(&b, "First hit after Redis answered: p50 %s, max %s.\n",
			r.FirstHit[n/2].Round(time.Millisecond), r.FirstHit[n-1].Round(time.Millisecond))
	}
	return b.String()
}

// Write writes the report as RESTART-<stamp>-<mode>.md under dir.
func (r RestartResult) Write(dir, command, label string, started time.Time, load [2]string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("RESTART-%s-%s.md", started.UTC().Format("2006-01-02-1504"), r.Params.Mode))
	return path, os.WriteFile(path, []byte(r.Markdown(command, label, started, load)), 0o644)
}
