package main

// End-to-end tests: the built binary, run as an operator runs it, in front
// of the real demo-upstream binary, on real sockets.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/config"
)

// bins are the binaries TestMain builds, once for every test.
var bins struct{ sidecache, demo string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sidecache-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins.sidecache = filepath.Join(dir, "sidecache")
	bins.demo = filepath.Join(dir, "demo-upstream")
	err = build(bins.sidecache, ".", raceEnabled)
	if err == nil {
		err = build(bins.demo, "../demo-upstream", false)
	}
	code := 1
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func build(out, pkg string, race bool) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", pkg, err)
	}
	return nil
}

func TestVersion(t *testing.T) {
	code, stdout, stderr := runBinary(t, "-version")
	if code != 0 {
		t.Fatalf("-version exited %d; stderr:\n%s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "sidecache ") || !strings.Contains(stdout, runtime.Version()) {
		t.Errorf("-version printed %q, want \"sidecache <version> %s\"", stdout, runtime.Version())
	}
}

func TestCheckShippedConfigs(t *testing.T) {
	for _, path := range []string{"../../config/sidecache.yaml", "../../config/sidecache-redis.yaml"} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			code, stdout, stderr := runBinary(t, "-config", path, "-check")
			if code != 0 {
				t.Fatalf("-check exited %d; stderr:\n%s", code, stderr)
			}
			if !strings.Contains(stdout, path) || !strings.Contains(stdout, "ok") {
				t.Errorf("-check printed %q, want the file and ok", stdout)
			}
			if strings.Contains(stdout, "warning") {
				t.Errorf("-check warns about a shipped config:\n%s", stdout)
			}
		})
	}
}

// A tagging route whose ID param matches any spelling is valid, so -check
// exits 0, but it prints a warning naming the field path: /clients/07
// would invalidate client:07 and leave client:7 stale.
func TestCheckWarnsAboutUnconstrainedParams(t *testing.T) {
	cfg := writeFile(t, filepath.Join(t.TempDir(), "loose.yaml"), `listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
upstream:
  url: http://127.0.0.1:1
routes:
  - name: client
    path: /clients/{id}
    ttl: 5m
    tags: ["client:{id}"]
  - name: client-write
    methods: [PATCH]
    path: /clients/{id:[1-9][0-9]*}
    invalidate: ["client:{id}"]
`)
	code, stdout, stderr := runBinary(t, "-config", cfg, "-check")
	if code != 0 {
		t.Fatalf("-check exited %d, want 0 (a warning is not an error); stderr:\n%s", code, stderr)
	}
	if n := strings.Count(stdout, "warning: "); n != 1 || lineContaining(stdout, "warning: routes[0].path:") == "" {
		t.Fatalf("-check printed:\n%s\nwant one warning line for routes[0].path", stdout)
	}
}

// badConfig has four problems of different kinds; the operator must see
// all of them at once, each with its field path.
const badConfig = `listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
upstream:
  url: http://127.0.0.1:1
  timout: 5s
routes:
  - name: client
    path: /clients/{id}
    ttl: 5x
  - name: client
    methods: [PATCH]
    path: /clients/{id}
  - name: users-list
    path: /users
    split:
      param: ids
      route: user
`

var badConfigPaths = []string{
	"upstream.timout",       // unknown field
	"routes[0].ttl",         // bad duration
	"routes[1].name",        // duplicate route name
	"routes[2].split.route", // unknown route
}

func TestBadConfig(t *testing.T) {
	bad := writeFile(t, filepath.Join(t.TempDir(), "bad.yaml"), badConfig)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"check", []string{"-config", bad, "-check"}},
		{"run", []string{"-config", bad}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runBinary(t, tc.args...)
			if code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if strings.Contains(stdout+stderr, "listening") {
				t.Errorf("a bad config got as far as listening:\n%s%s", stdout, stderr)
			}
			for _, path := range badConfigPaths {
				line := lineContaining(stderr, path+":")
				if line == "" {
					t.Errorf("stderr does not name %s:\n%s", path, stderr)
				} else if !strings.Contains(line, bad) {
					t.Errorf("the line naming %s does not name the file %s: %q", path, bad, line)
				}
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "nope.yaml")
		code, _, stderr := runBinary(t, "-config", missing)
		if code != 1 || !strings.Contains(stderr, missing) {
			t.Errorf("exit %d, stderr %q; want 1 and the file named", code, stderr)
		}
	})
}

func lineContaining(s, sub string) string {
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}

// shippedConfig is config/sidecache.yaml with its listeners moved to free
// ports and its upstream pointed at upstreamURL, so the test runs what an
// operator runs.
func shippedConfig(t *testing.T, upstreamURL string) (path string, routes []string) {
	t.Helper()
	const shipped = "../../config/sidecache.yaml"
	data, err := os.ReadFile(shipped)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for _, r := range []struct{ re, repl string }{
		{`(?m)^listen: .*$`, "listen: 127.0.0.1:0"},
		{`(?m)^  listen: .*$`, "  listen: 127.0.0.1:0"},
		{`(?m)^  url: .*$`, "  url: " + upstreamURL},
	} {
		re := regexp.MustCompile(r.re)
		if n := len(re.FindAllString(s, -1)); n != 1 {
			t.Fatalf("%s: %d lines match %s, want 1; update this test", shipped, n, r.re)
		}
		s = re.ReplaceAllLiteralString(s, r.repl)
	}
	path = writeFile(t, filepath.Join(t.TempDir(), "sidecache.yaml"), s)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range cfg.Routes {
		routes = append(routes, r.Name)
	}
	return path, routes
}

func TestServe(t *testing.T) {
	_, demoURL := startDemo(t)
	cfgPath, routeNames := shippedConfig(t, demoURL)
	sc := startSidecache(t, cfgPath)
	c := &http.Client{Timeout: within}

	t.Run("cache", func(t *testing.T) {
		first := get(t, c, sc.proxy+"/clients/42")
		second := get(t, c, sc.proxy+"/clients/42")
		if first.code != 200 || second.code != 200 || first.body != second.body || !strings.Contains(first.body, `"id":42`) {
			t.Fatalf("GET /clients/42 twice: %d %q, %d %q", first.code, first.body, second.code, second.body)
		}
		if cs := first.header.Get("Cache-Status"); !strings.Contains(cs, "fwd=miss") || !strings.Contains(cs, "stored") {
			t.Errorf("first Cache-Status = %q, want a stored miss", cs)
		}
		if cs := second.header.Get("Cache-Status"); !strings.Contains(cs, "hit") || !strings.Contains(cs, "detail=l1") {
			t.Errorf("second Cache-Status = %q, want an L1 hit", cs)
		}
		if second.header.Get("Age") == "" {
			t.Errorf("a hit without Age")
		}
		var counts map[string]int
		if err := json.Unmarshal([]byte(get(t, c, demoURL+"/_demo/counts").body), &counts); err != nil {
			t.Fatal(err)
		}
		if n := counts["GET /clients/{id}"]; n != 1 {
			t.Errorf("upstream saw GET /clients/{id} %d times, want 1", n)
		}
	})

	t.Run("split", func(t *testing.T) {
		// users-list splits into the batched "user" route: wiring of both.
		r := get(t, c, sc.proxy+"/users?ids=3,1,2")
		var users []struct{ ID int }
		if err := json.Unmarshal([]byte(r.body), &users); err != nil || r.code != 200 {
			t.Fatalf("GET /users?ids=3,1,2: %d %q (%v)", r.code, r.body, err)
		}
		if ids := []int{users[0].ID, users[1].ID, users[2].ID}; len(users) != 3 || !slices.Equal(ids, []int{3, 1, 2}) {
			t.Errorf("split answer ids %v, want [3 1 2] in the requested order", ids)
		}
		if one := get(t, c, sc.proxy+"/users/1"); !strings.Contains(one.header.Get("Cache-Status"), "hit") {
			t.Errorf("/users/1 after the split: Cache-Status %q, want a hit filled by the split", one.header.Get("Cache-Status"))
		}
	})

	t.Run("healthz", func(t *testing.T) {
		if r := get(t, c, sc.admin+"/healthz"); r.code != 200 {
			t.Errorf("/healthz = %d", r.code)
		}
	})

	t.Run("readyz", func(t *testing.T) {
		r := get(t, c, sc.admin+"/readyz")
		var body struct {
			Ready bool
			L2    string
		}
		if err := json.Unmarshal([]byte(r.body), &body); err != nil {
			t.Fatalf("/readyz body %q: %v", r.body, err)
		}
		if r.code != 200 || !body.Ready || body.L2 != "disabled" {
			t.Errorf("/readyz = %d %s, want 200, ready, l2 disabled", r.code, r.body)
		}
	})

	t.Run("routes", func(t *testing.T) {
		r := get(t, c, sc.admin+"/routes")
		var got []struct{ Name, Path string }
		if err := json.Unmarshal([]byte(r.body), &got); err != nil {
			t.Fatalf("/routes body %q: %v", r.body, err)
		}
		var names []string
		for _, rt := range got {
			names = append(names, rt.Name)
		}
		if !slices.Equal(names, routeNames) {
			t.Errorf("/routes names %v, want %v", names, routeNames)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		for _, result := range []string{"hit", "miss"} {
			if v := sc.metricValue(t, "sidecache_requests_total", "route", "client", "result", result); v != 1 {
				t.Errorf(`sidecache_requests_total{route="client",result=%q} = %v, want 1`, result, v)
			}
		}
	})

	sc.signal(t, syscall.SIGTERM)
	if code := sc.wait(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

// TestGracefulShutdown: SIGTERM turns readiness off first, then stops
// accepting, lets the request in flight finish, and exits 0.
func TestGracefulShutdown(t *testing.T) {
	_, demoURL := startDemo(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf(configTmpl, demoURL, "5m") + "shutdown_delay: 2s\n"
	sc := startSidecache(t, writeFile(t, filepath.Join(dir, "sidecache.yaml"), cfg))
	c := &http.Client{Timeout: within}

	// /self has no route: a pass-through, the slowest path to drain.
	const delay = 6 * time.Second
	slow := make(chan response, 1)
	slowErr := make(chan error, 1)
	go func() {
		r, err := fetch(c, sc.proxy+"/self", "X-Demo-Delay", delay.String())
		if err != nil {
			slowErr <- err
			return
		}
		slow <- r
	}()
	waitCount(t, c, demoURL, "GET /self", 1) // the upstream holds it now

	sc.signal(t, syscall.SIGTERM)
	sent := time.Now()

	// During shutdown_delay the pod reports not ready.
	for {
		r, err := fetch(c, sc.admin+"/readyz")
		if err == nil && r.code == http.StatusServiceUnavailable && strings.Contains(r.body, "draining") {
			break
		}
		if err != nil || time.Since(sent) > 2*time.Second {
			t.Fatalf("/readyz after SIGTERM = %+v, %v; want 503 draining during shutdown_delay", r, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Then the listener closes while the slow request is still running.
	for !refused(sc.proxy) {
		select {
		case r := <-slow:
			t.Fatalf("the slow request finished (%d) before the listener closed", r.code)
		case err := <-slowErr:
			t.Fatalf("the slow request failed while draining: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}

	select {
	case r := <-slow:
		if r.code != 200 || !strings.Contains(r.body, "demo-upstream") {
			t.Errorf("in-flight request during drain: %d %q, want 200 from the upstream", r.code, r.body)
		}
	case err := <-slowErr:
		t.Fatalf("in-flight request failed during drain: %v", err)
	case <-time.After(within):
		t.Fatalf("in-flight request not answered %v after SIGTERM", within)
	}
	if code := sc.wait(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	for _, addr := range []string{sc.proxy, sc.admin} {
		if !refused(addr) {
			t.Errorf("%s still accepts connections after exit", addr)
		}
	}
}

// waitCount waits until demo-upstream has counted n calls to endpoint.
func waitCount(t *testing.T, c *http.Client, demoURL, endpoint string, n int) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var counts map[string]int
		if err := json.Unmarshal([]byte(get(t, c, demoURL+"/_demo/counts").body), &counts); err != nil {
			t.Fatal(err)
		}
		if counts[endpoint] >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream counted %d calls to %s, want %d", counts[endpoint], endpoint, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// refused reports whether a new TCP connection to the URL's host is refused.
func refused(rawURL string) bool {
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(rawURL, "http://"), time.Second)
	if err == nil {
		conn.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}
