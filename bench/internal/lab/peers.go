package lab

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/sidecache/sidecache/bench/internal/load"
	"github.com/sidecache/sidecache/bench/internal/proc"
	"github.com/sidecache/sidecache/bench/internal/resp"
	"github.com/sidecache/sidecache/internal/demo"
)

// ServeBare is the bare Go peer: net/http answering GET /clients/{id} with
// the demo's own bytes, held in memory. It is the ceiling a Go server can
// reach on this machine with this client. The bench binary runs it when
// started as `bench -serve-bare addr -records n`, which is how startBare
// starts it: as its own process, like every other server under test.
//
// With -redis addr it stores every record's bytes in that Redis first
// (BareRedisKey) and then reads the body of each answer from there with
// one GET on a pooled connection (resp.Pool), headers as from memory: the
// -cpu l2 row's floor, what one Redis round trip alone costs a Go server.
//
// With -batch addr it also serves GET /users/{id} by batching the ids it
// does not hold into bulk calls to the demo upstream at addr (bareBatch):
// the -cpu batch row's floor.
func ServeBare(addr string, args []string) error {
	fs := flag.NewFlagSet("serve-bare", flag.ContinueOnError)
	records := fs.Int("records", 10000, "clients to serve")
	redis := fs.String("redis", "", "read each body from this Redis (one GET per request)")
	upstream := fs.String("batch", "", "serve GET /users/{id} by batching into bulk calls to this demo upstream")
	lean := fs.Bool("batch-lean", false, "split each bulk answer with sidecache's splitter instead of encoding/json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	h, err := bareHandler(*records, *redis)
	if err != nil {
		return err
	}
	if *upstream != "" {
		mux := http.NewServeMux()
		mux.Handle("/clients/", h)
		newBareBatch(*upstream, *lean).routes(mux)
		h = mux
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Printf("bare: listening on http://%s", ln.Addr())
	return (&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
}

// BareRedisKey is the Redis key of client id in the bare server's Redis mode.
func BareRedisKey(id int) string { return "bench-bare:clients:" + strconv.Itoa(id) }

// bareHandler serves GET /clients/{id} for ids 1..records from memory, or
// with redis set, each body read from that Redis after storing them all.
func bareHandler(records int, redis string) (http.Handler, error) {
	type item struct {
		body []byte
		etag []string
		key  string
	}
	items := make([]item, records+1)
	for id := 1; id <= records; id++ {
		body, etag, _ := demo.Record("clients", id, records)
		items[id] = item{body, []string{etag}, BareRedisKey(id)}
	}
	ctype, clen := []string{"application/json"}, make([][]string, len(items))
	for i, it := range items {
		clen[i] = []string{strconv.Itoa(len(it.body))}
	}
	mux := http.NewServeMux()
	if redis == "" {
		mux.HandleFunc("GET /clients/{id}", func(w http.ResponseWriter, r *http.Request) {
			id, err := strconv.Atoi(r.PathValue("id"))
			if err != nil || id < 1 || id >= len(items) {
				http.NotFound(w, r)
				return
			}
			h := w.Header()
			h["Content-Type"], h["Content-Length"], h["Etag"] = ctype, clen[id], items[id].etag
			w.Write(items[id].body)
		})
		return mux, nil
	}
	if err := storeBare(redis, records, func(id int) (string, []byte) { return items[id].key, items[id].body }); err != nil {
		return nil, err
	}
	pool := resp.NewPool(redis)
	mux.HandleFunc("GET /clients/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.Atoi(r.PathValue("id"))
		if err != nil || id < 1 || id >= len(items) {
			http.NotFound(w, r)
			return
		}
		body, ok, err := pool.Get(items[id].key)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		if !ok {
			http.Error(w, "not in redis: "+items[id].key, http.StatusBadGateway)
			return
		}
		h := w.Header()
		h["Content-Type"], h["Content-Length"], h["Etag"] = ctype, []string{strconv.Itoa(len(body))}, items[id].etag
		w.Write(body)
	})
	return mux, nil
}

// storeBare stores records 1..n in the Redis at addr, 500 to an MSET.
func storeBare(addr string, n int, record func(id int) (string, []byte)) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := resp.Dial(ctx, addr)
	if err != nil {
		return fmt.Errorf("bare: store records: %w", err)
	}
	defer c.Close()
	for first := 1; first <= n; first += 500 {
		args := []string{"MSET"}
		for id := first; id <= min(first+499, n); id++ {
			k, v := record(id)
			args = append(args, k, string(v))
		}
		if _, err := c.Do(args...); err != nil {
			return fmt.Errorf("bare: store records: %w", err)
		}
	}
	return nil
}

func (l *Lab) startBare(ctx context.Context, env ...string) (*sut, error) {
	return l.startBareArgs(ctx, envName("bare", env), env)
}

// startBareRedis is the bare server in its Redis mode at GOMAXPROCS=1,
// reading from the Redis at redis.
func (l *Lab) startBareRedis(ctx context.Context, redis string) (*sut, error) {
	env := []string{"GOMAXPROCS=1"}
	return l.startBareArgs(ctx, envName("bare-redis", env), env, "-redis", redis)
}

// startBareBatch is the bare server in its batching mode at GOMAXPROCS=1
// in front of the demo upstream, its store emptied by s.purge; lean
// splits with sidecache's splitter.
func (l *Lab) startBareBatch(ctx context.Context, lean bool) (*sut, error) {
	env := []string{"GOMAXPROCS=1"}
	name, args := "bare-batch", []string{"-batch", l.demoAddr}
	if lean {
		name, args = "bare-batch-lean", append(args, "-batch-lean")
	}
	s, err := l.startBareArgs(ctx, envName(name, env), env, args...)
	if err != nil {
		return nil, err
	}
	s.purge = func(ctx context.Context) error {
		code, body, err := httpDo(ctx, "POST", "http://"+s.addr+BareForgetPath, nil)
		if err == nil && code != http.StatusNoContent {
			err = fmt.Errorf("bare batch: forget: status %d: %s", code, body)
		}
		return err
	}
	return s, nil
}

func (l *Lab) startBareArgs(ctx context.Context, name string, env []string, args ...string) (*sut, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + itoa(port)
	argv := append([]string{self, "-serve-bare", addr, "-records", itoa(l.p.Records)}, args...)
	pr, err := l.startEnv(name, env, argv...)
	if err != nil {
		return nil, err
	}
	s := &sut{addr: addr, procs: []*proc.Proc{pr}}
	if err := pr.WaitReady(ctx, 10*time.Second, httpStatus("http://"+addr+"/clients/1", 200)); err != nil {
		l.stopSUT(s)
		return nil, err
	}
	return s, nil
}

var errNotInstalled = errors.New("not installed")

func (l *Lab) startNginx(ctx context.Context, upstream string, cache bool) (*sut, error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		return nil, errNotInstalled
	}
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	name := "nginx-pass"
	if cache {
		name = "nginx-cache"
	}
	dir := filepath.Join(l.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(nginxConf(dir, port, upstream, cache)), 0o644); err != nil {
		return nil, err
	}
	pr, err := l.start(name, bin, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"), "-g", "daemon off;")
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + itoa(port)
	s := &sut{addr: addr, procs: []*proc.Proc{pr}}
	if err := pr.WaitReady(ctx, 10*time.Second, httpStatus("http://"+addr+"/_bench_ready", 404, 200)); err != nil {
		l.stopSUT(s)
		return nil, err
	}
	return s, nil
}

// startVarnish runs varnishd with its built-in VCL in front of upstream:
// responses without Cache-Control get the default TTL (-t).
func (l *Lab) startVarnish(ctx context.Context, upstream string) (*sut, error) {
	bin, err := exec.LookPath("varnishd")
	if err != nil {
		return nil, errNotInstalled
	}
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + itoa(port)
	argv := []string{bin, "-F", "-a", addr, "-b", upstream, "-n", filepath.Join(l.dir, "varnish"),
		"-s", "malloc,256m", "-t", "3600"} // HitTTL
	if os.Geteuid() == 0 {
		argv = append(argv, "-j", "none") // no privilege-dropping jail for a throwaway instance
	}
	pr, err := l.start("varnish", argv...)
	if err != nil {
		return nil, err
	}
	s := &sut{addr: addr, procs: []*proc.Proc{pr}}
	if err := pr.WaitReady(ctx, 20*time.Second, httpStatus("http://"+addr+"/_bench_ready", 404, 200)); err != nil {
		l.stopSUT(s)
		return nil, err
	}
	return s, nil
}

// RunPeers fills the peers tables: pass-through against the bare Go server
// as a fast upstream (so the proxy's own cost shows, not the demo's slots),
// and cache hits against the demo with every key already cached.
//
// Every peer is started first and kept up; then the measurements run in
// rounds, each peer once per round, and the round with the median TPS is
// kept. On a shared machine this spreads background noise over all peers
// instead of letting it land on one.
func (l *Lab) RunPeers(ctx context.Context, res *Results) {
	log.Printf("peers (%d rounds)", l.p.PeerRounds)
	w, _ := load.PickWorkloads([]string{"clients-get"})
	has := func(peer string) bool { return slices.Contains(l.p.Peers, peer) }

	bare, err := l.startBare(ctx)
	if err != nil {
		log.Printf("  bare Go server: %v", err)
		res.Notes = append(res.Notes, "The bare Go server failed to start, so no peer was measured: "+err.Error())
		return
	}
	defer l.stopSUT(bare)

	type entry struct {
		test, server string
		start        func() (*sut, error)
		fill         bool
	}
	already := func() (*sut, error) { return &sut{addr: bare.addr}, nil }
	var entries []entry
	add := func(peer string, e entry) {
		if has(peer) {
			entries = append(entries, e)
		}
	}
	add("bare", entry{"pass", "bare Go (no proxy)", already, false})
	add("sidecache", entry{"pass", "sidecache (no routes)", func() (*sut, error) { return l.startSidecar(ctx, "pass", bare.addr, "") }, false})
	add("nginx", entry{"pass", "nginx proxy_pass", func() (*sut, error) { return l.startNginx(ctx, bare.addr, false) }, false})
	add("sidecache", entry{"hit", "sidecache (L1 hit)", func() (*sut, error) { return l.startSidecar(ctx, "hit", l.demoAddr, "") }, true})
	add("nginx", entry{"hit", "nginx proxy_cache", func() (*sut, error) { return l.startNginx(ctx, l.demoAddr, true) }, true})
	add("varnish", entry{"hit", "varnish", func() (*sut, error) { return l.startVarnish(ctx, l.demoAddr) }, true})
	add("bare", entry{"hit", "bare Go (from memory)", already, false})

	if err := l.demo.reset(ctx); err != nil {
		res.Notes = append(res.Notes, "Peers not measured: "+err.Error())
		return
	}
	results := make([]PeerResult, len(entries))
	suts := make([]*sut, len(entries))
	for i, e := range entries {
		results[i] = PeerResult{Test: e.test, Server: e.server}
		s, err := e.start()
		switch {
		case errors.Is(err, errNotInstalled):
			results[i].Missing = "not measured (not installed)"
			continue
		case err != nil:
			results[i].Missing = "not measured (failed to start; see the bench log)"
			log.Printf("  %s %s: %v", e.test, e.server, err)
			continue
		}
		defer l.stopSUT(s)
		if e.fill {
			if err := prefill(ctx, s.addr, "/clients/", l.p.Keys); err != nil {
				results[i].Missing = "not measured (" + err.Error() + ")"
				log.Printf("  %s %s: %v", e.test, e.server, err)
				continue
			}
		}
		if l.p.Warmup > 0 {
			l.attack(s.addr, w[0], l.p.Warmup, 0).Run(ctx)
		}
		suts[i] = s
	}

	rounds := make([][]PeerResult, len(entries))
	for round := 1; round <= l.p.PeerRounds && ctx.Err() == nil; round++ {
		for i, s := range suts {
			if s == nil || ctx.Err() != nil {
				continue
			}
			before, err := l.demo.counts(ctx)
			if err != nil {
				results[i].Missing = "not measured (" + err.Error() + ")"
				continue
			}
			pr := results[i]
			pr.Out = l.attack(s.addr, w[0], l.p.Duration, 0).Run(ctx)
			after, _ := l.demo.counts(ctx)
			pr.Upstream, _ = upstreamDelta(before, after)
			rounds[i] = append(rounds[i], pr)
			log.Printf("  round %d %-5s %-24s %9.0f TPS  p99 %-9s upstream %d errors %d",
				round, pr.Test, pr.Server, pr.Out.TPS(), ms(pr.Out.Latencies.P99), pr.Upstream, pr.Out.Errors)
		}
	}
	for i := range results {
		if len(rounds[i]) > 0 {
			results[i] = medianRound(rounds[i])
		}
	}
	res.Peers = append(res.Peers, results...)
}

// medianRound is the round with the median TPS (the lower middle one of
// an even count); its TPS and latencies are reported together.
func medianRound(rs []PeerResult) PeerResult {
	sorted := append([]PeerResult(nil), rs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Out.TPS() < sorted[j].Out.TPS() })
	m := sorted[(len(sorted)-1)/2]
	m.Rounds = len(rs)
	return m
}
