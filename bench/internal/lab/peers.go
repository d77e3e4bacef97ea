package lab

import (
	"context"
	"errors"
	"flag"
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
	"github.com/sidecache/sidecache/internal/demo"
)

// ServeBare is the bare Go peer: net/http answering GET /clients/{id} with
// the demo's own bytes, held in memory. It is the ceiling a Go server can
// reach on this machine with this client. The bench binary runs it when
// started as `bench -serve-bare addr -records n`, which is how startBare
// starts it: as its own process, like every other server under test.
func ServeBare(addr string, args []string) error {
	fs := flag.NewFlagSet("serve-bare", flag.ContinueOnError)
	records := fs.Int("records", 10000, "clients to serve")
	if err := fs.Parse(args); err != nil {
		return err
	}
	type item struct {
		body []byte
		etag []string
	}
	items := make([]item, *records+1)
	for id := 1; id <= *records; id++ {
		body, etag, _ := demo.Record("clients", id, *records)
		items[id] = item{body, []string{etag}}
	}
	ctype, clen := []string{"application/json"}, make([][]string, len(items))
	for i, it := range items {
		clen[i] = []string{strconv.Itoa(len(it.body))}
	}
	mux := http.NewServeMux()
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
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Printf("bare: listening on http://%s", ln.Addr())
	return (&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
}

func (l *Lab) startBare(ctx context.Context, env ...string) (*sut, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + itoa(port)
	pr, err := l.startEnv(envName("bare", env), env, self, "-serve-bare", addr, "-records", itoa(l.p.Records))
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
		"-s", "malloc,256m", "-t", "300"}
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
	add("sidecache", entry{"hit", "sidecache (L1 hit)", func() (*sut, error) { return l.startSidecar(ctx, "cache", l.demoAddr, "") }, true})
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
