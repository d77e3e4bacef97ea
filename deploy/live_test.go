package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
	"sigs.k8s.io/yaml"
)

// liveWithin bounds every wait on the running binary.
const liveWithin = 15 * time.Second

// TestLiveMetrics holds the dashboard and the alert rules to what the real
// binary exports: two replicas sharing a real Redis, in front of an
// upstream, get a hit, a miss, a collapsed miss, a batch, a write that
// invalidates (here and, through pub/sub, on the peer), an upstream error
// and a reload; then every series the dashboard and the rules select must
// be in the live /metrics, every live family must carry exactly the labels
// specMetrics (and so checkExpr) knows, and the traffic must show up in the
// values.
func TestLiveMetrics(t *testing.T) {
	bin := buildSidecache(t)
	rdb := redistest.Start(t)
	up := newLiveUpstream(t)
	cfg := filepath.Join(t.TempDir(), "sidecache.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(liveConfig, up.URL, rdb.Addr())), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startLive(t, bin, cfg, "replica a")
	b := startLive(t, bin, cfg, "replica b")
	c := &http.Client{Timeout: liveWithin}

	// A miss, then a hit, on both replicas; b's copy comes from L2.
	liveGet(t, c, a.proxy+"/clients/1", "fwd=miss")
	liveGet(t, c, a.proxy+"/clients/1", "hit")
	eventually(t, "an L2 hit on replica b", func(i int) bool {
		url := fmt.Sprintf("/clients/%d", 100+i)
		liveGet(t, c, a.proxy+url, "fwd=miss")
		time.Sleep(20 * time.Millisecond) // the L2 write is asynchronous
		return strings.Contains(liveGet(t, c, b.proxy+url, "").header.Get("Cache-Status"), "detail=l2")
	})
	liveGet(t, c, b.proxy+"/clients/1", "")

	// Concurrent misses on one slow key: one upstream call, the rest collapsed.
	eventually(t, "a collapsed request", func(i int) bool {
		url := fmt.Sprintf("%s/clients/slow-%d", a.proxy, i)
		var collapsed atomic.Bool
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if strings.Contains(liveGet(t, c, url, "").header.Get("Cache-Status"), "collapsed") {
					collapsed.Store(true)
				}
			})
		}
		wg.Wait()
		return collapsed.Load()
	})

	// A split request becomes one bulk call on the batched route.
	r := liveGet(t, c, a.proxy+"/users?ids=3,1,2", "")
	if r.code != 200 || !strings.Contains(r.body, `{"id":3}`) || up.bulk.Load() == 0 {
		t.Fatalf("GET /users?ids=3,1,2: %d %q, %d bulk calls; want a 200 from one bulk call", r.code, r.body, up.bulk.Load())
	}

	// A write on a invalidates its tags there and, through Redis, on b.
	liveDo(t, c, http.MethodPatch, a.proxy+"/clients/1", 200)
	eventually(t, "the write's invalidation on replica b", func(int) bool {
		return strings.Contains(liveGet(t, c, b.proxy+"/clients/1", "").header.Get("Cache-Status"), "fwd=miss")
	})

	// An upstream 5xx, and a reload on SIGHUP.
	liveDo(t, c, http.MethodGet, a.proxy+"/clients/fail", 503)
	if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}

	var liveA, liveB []liveSample
	eventually(t, "the reload counted", func(int) bool {
		liveA = a.scrape(t)
		return value(liveA, "sidecache_config_reloads_total", "result", "success") == 1
	})
	liveB = b.scrape(t)

	t.Run("queried series exist", func(t *testing.T) {
		exprs := queriedExprs(t)
		if len(exprs) == 0 {
			t.Fatal("no expressions found in the dashboard and the rules")
		}
		// The matcher must be able to say no, or this subtest proves nothing.
		for sel, want := range map[string]bool{`sidecache_requests_total{result="hit"}`: true, `sidecache_requests_total{result="nope"}`: false} {
			e, _ := promql(sel)
			if got := slices.ContainsFunc(liveA, func(s liveSample) bool { return selects(selectors(e)[0], s) }); got != want {
				t.Fatalf("selects(%s) on the live series = %v, want %v", sel, got, want)
			}
		}
		names := map[string]bool{}
		for _, s := range liveA {
			names[s.name] = true
		}
		for _, src := range exprs {
			e, err := promql(src.expr)
			if err != nil {
				t.Errorf("%s: %v", src.where, err)
				continue
			}
			for _, vs := range selectors(e) {
				name := selectorName(vs)
				if !names[name] {
					t.Errorf("%s selects %s, which is not in the live /metrics", src.where, name)
					continue
				}
				if !slices.ContainsFunc(liveA, func(s liveSample) bool { return selects(vs, s) }) {
					t.Errorf("%s: no live series matches %s", src.where, vs)
				}
			}
		}
		for _, name := range seriesNames() {
			if !names[name] {
				t.Errorf("specMetrics lists %s, but the live /metrics has no such series", name)
			}
		}
	})

	t.Run("labels match specMetrics", func(t *testing.T) {
		for _, s := range slices.Concat(liveA, liveB) {
			fam, ok := family(s.name)
			if !strings.HasPrefix(s.name, "sidecache_") {
				continue // Go and process collectors
			}
			if !ok {
				t.Errorf("live series %s is not in specMetrics: the dashboard checks cannot see it", s.name)
				continue
			}
			spec := specMetrics[fam]
			var want []string
			for l := range spec.labels {
				want = append(want, l)
			}
			if strings.HasSuffix(s.name, "_bucket") {
				want = append(want, "le")
			}
			var got []string
			for l, v := range s.labels {
				got = append(got, l)
				if allowed := spec.labels[l]; allowed != nil && !slices.Contains(allowed, v) {
					t.Errorf("%s{%s=%q}: value not in specMetrics %v", s.name, l, v, allowed)
				}
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s has labels %v, specMetrics says %v", s.name, got, want)
			}
		}
	})

	t.Run("traffic counted", func(t *testing.T) {
		for _, c := range []struct {
			live   []liveSample
			name   string
			labels []string
		}{
			{liveA, "sidecache_requests_total", []string{"route", "client", "result", "miss"}},
			{liveA, "sidecache_requests_total", []string{"route", "client", "result", "hit"}},
			{liveA, "sidecache_requests_total", []string{"route", "client", "result", "collapsed"}},
			{liveA, "sidecache_request_duration_seconds_count", []string{"route", "client", "result", "hit"}},
			{liveA, "sidecache_cache_lookups_total", []string{"tier", "l1", "result", "hit"}},
			{liveA, "sidecache_cache_lookups_total", []string{"tier", "l2", "result", "miss"}},
			{liveB, "sidecache_cache_lookups_total", []string{"tier", "l2", "result", "hit"}},
			{liveA, "sidecache_upstream_requests_total", []string{"route", "client", "code", "2xx"}},
			{liveA, "sidecache_upstream_requests_total", []string{"route", "client", "code", "5xx"}},
			{liveA, "sidecache_upstream_duration_seconds_count", []string{"route", "client"}},
			{liveA, "sidecache_coalesced_requests_total", []string{"route", "client"}},
			{liveA, "sidecache_batch_size_count", []string{"route", "user"}},
			{liveA, "sidecache_invalidations_total", []string{"source", "write"}},
			{liveB, "sidecache_invalidations_total", []string{"source", "peer"}},
			{liveA, "sidecache_l1_items", nil},
			{liveA, "sidecache_l1_bytes", nil},
			{liveA, "sidecache_l2_up", nil},
			{liveA, "sidecache_build_info", nil},
		} {
			if v := value(c.live, c.name, c.labels...); !(v > 0) {
				t.Errorf("%s%v = %v after traffic that should count there", c.name, c.labels, v)
			}
		}
	})
}

const liveConfig = `listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
upstream:
  url: %s
  timeout: 5s
shutdown_timeout: 5s
cache:
  l2:
    redis:
      addrs: [%s]
      timeout: 500ms
routes:
  - name: client
    methods: [GET]
    path: /clients/{id}
    ttl: 5m
    tags: ["client:{id}"]
  - name: client-write
    methods: [PATCH]
    path: /clients/{id}
    invalidate: ["client:{id}"]
  - name: user
    methods: [GET]
    path: /users/{id}
    ttl: 1m
    batch:
      path: /users
      param: ids
      id_field: id
  - name: users-list
    methods: [GET]
    path: /users
    split:
      param: ids
      route: user
`

// liveUpstream is the service behind the sidecar: /clients/slow-* answers
// late (so concurrent misses overlap), /clients/fail answers 503.
type liveUpstream struct {
	*httptest.Server
	bulk atomic.Int64
}

func newLiveUpstream(t *testing.T) *liveUpstream {
	u := &liveUpstream{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /clients/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		switch {
		case id == "fail":
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		case strings.HasPrefix(id, "slow"):
			time.Sleep(300 * time.Millisecond)
		}
		fmt.Fprintf(w, `{"id":%q}`, id)
	})
	mux.HandleFunc("PATCH /clients/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"id":%q}`, r.PathValue("id"))
	})
	mux.HandleFunc("GET /users/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"id":%s}`, r.PathValue("id"))
	})
	mux.HandleFunc("GET /users", func(w http.ResponseWriter, r *http.Request) {
		u.bulk.Add(1)
		var out []string
		for id := range strings.SplitSeq(r.URL.Query().Get("ids"), ",") {
			if _, err := strconv.Atoi(id); err == nil {
				out = append(out, `{"id":`+id+`}`)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "[%s]", strings.Join(out, ","))
	})
	u.Server = httptest.NewServer(mux)
	t.Cleanup(u.Close)
	return u
}

// buildSidecache builds the binary from the main module, as the Dockerfile does.
func buildSidecache(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sidecache")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/sidecache/sidecache/cmd/sidecache")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// liveProc is one running sidecache binary.
type liveProc struct {
	name         string
	cmd          *exec.Cmd
	out          *lockedBuffer
	proxy, admin string
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var liveListening = regexp.MustCompile(`msg="sidecache listening" proxy=(http://\S+) admin=(http://\S+)`)

// startLive runs the binary and reads its listeners' addresses from its
// start-up log line (the config asks for port 0). When the test ends it is
// stopped with SIGTERM, must exit 0, and its log is shown if the test failed.
func startLive(t *testing.T, bin, cfg, name string) *liveProc {
	t.Helper()
	p := &liveProc{name: name, out: new(lockedBuffer)}
	p.cmd = exec.Command(bin, "-config", cfg)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = liveProcAttr()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: exit after SIGTERM: %v", name, err)
			}
		case <-time.After(liveWithin):
			_ = p.cmd.Process.Kill()
			<-done
			t.Errorf("%s: still running %v after SIGTERM", name, liveWithin)
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.out)
		}
	})
	deadline := time.Now().Add(liveWithin)
	for {
		if m := liveListening.FindStringSubmatch(p.out.String()); m != nil {
			p.proxy, p.admin = m[1], m[2]
			return p
		}
		select {
		case err := <-done:
			done <- err // for the cleanup
			t.Fatalf("%s exited (%v) before listening:\n%s", name, err, p.out)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listening after %v:\n%s", name, liveWithin, p.out)
		}
	}
}

func (p *liveProc) scrape(t *testing.T) []liveSample {
	t.Helper()
	r := liveDo(t, http.DefaultClient, http.MethodGet, p.admin+"/metrics", 200)
	samples, err := parseExposition(r.body)
	if err != nil {
		t.Fatalf("%s /metrics: %v", p.name, err)
	}
	return samples
}

type liveResponse struct {
	code   int
	header http.Header
	body   string
}

func liveDo(t *testing.T, c *http.Client, method, url string, wantCode int) liveResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveWithin)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(`{"name":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	// Clients reach every replica through one Service name, and the host
	// is part of the cache key: without this the replicas would not share.
	req.Host = "clients.svc.test"
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if wantCode != 0 && resp.StatusCode != wantCode {
		t.Fatalf("%s %s: %d %q, want %d", method, url, resp.StatusCode, body, wantCode)
	}
	return liveResponse{resp.StatusCode, resp.Header, string(body)}
}

// liveGet GETs url, wants a 200, and a Cache-Status containing want.
func liveGet(t *testing.T, c *http.Client, url, want string) liveResponse {
	t.Helper()
	r := liveDo(t, c, http.MethodGet, url, 200)
	if cs := r.header.Get("Cache-Status"); !strings.Contains(cs, want) {
		t.Fatalf("GET %s: Cache-Status %q, want %q", url, cs, want)
	}
	return r
}

// eventually retries try (with its attempt number) until it succeeds:
// the events it waits for are asynchronous (an L2 write, pub/sub) or need
// requests to overlap.
func eventually(t *testing.T, what string, try func(attempt int) bool) {
	t.Helper()
	deadline := time.Now().Add(liveWithin)
	for i := 0; !try(i); i++ {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, liveWithin)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exprSource is one PromQL expression and where it comes from.
type exprSource struct{ where, expr string }

// queriedExprs returns every expression of the dashboard and the rules.
func queriedExprs(t *testing.T) []exprSource {
	t.Helper()
	var out []exprSource
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, tg := range p.Targets {
				out = append(out, exprSource{fmt.Sprintf("panel %q query %s", p.Title, tg.RefID), tg.Expr})
			}
		}
	}
	walk(d.Panels)
	data, err = os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(data, &rf); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			out = append(out, exprSource{"alert " + r.Alert, r.Expr})
		}
	}
	return out
}
