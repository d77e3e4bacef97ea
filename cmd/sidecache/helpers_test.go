package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// within bounds every wait on a started process: generous, because the
// binaries may run under the race detector on a loaded 2-core machine.
const within = 15 * time.Second

// proc is one started binary whose output the test reads as it comes.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{} // closed once the process has been waited for
	err  error         // Wait's error; read after done
}

// syncBuffer collects a process's stdout and stderr for the test to read
// while the process still writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startProc runs bin with args. When the test ends, the process is killed
// if it still runs, its output is logged if the test failed, and a race
// report in it fails the test.
func startProc(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, name, bin, nil, args...)
}

// startProcEnv is startProc with env (KEY=value; KEY= unsets KEY) over the
// test's own environment.
func startProcEnv(t *testing.T, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, out: new(syncBuffer), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	if env != nil {
		p.cmd.Env = withEnv(os.Environ(), env)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		out := p.out.String()
		if strings.Contains(out, "WARNING: DATA RACE") {
			t.Errorf("%s reported a data race:\n%s", name, out)
		} else if t.Failed() {
			t.Logf("%s output:\n%s", name, out)
		}
	})
	return p
}

// waitOutput waits until the output matches re and returns the submatches
// of the first match. It fails the test if the process exits first.
func (p *proc) waitOutput(re *regexp.Regexp) []string {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if m := re.FindStringSubmatch(p.out.String()); m != nil {
			return m
		}
		select {
		case <-p.done:
			p.t.Fatalf("%s exited (%v) before printing %q; output:\n%s", p.name, p.err, re, p.out)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s printed no %q within %v; output:\n%s", p.name, re, within, p.out)
		}
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait() int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		p.t.Fatalf("%s still running %v later; output:\n%s", p.name, within, p.out)
	}
	var exit *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &exit):
		return exit.ExitCode()
	default:
		p.t.Fatalf("%s: %v", p.name, p.err)
		return -1
	}
}

func (p *proc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s: %v", p.name, err)
	}
}

// runBinary runs the sidecache binary to completion and returns its exit
// code, stdout and stderr separately.
func runBinary(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, bins.sidecache, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	// A race-enabled binary otherwise sleeps a second at exit.
	cmd.Env = append(os.Environ(), "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && ctx.Err() == nil:
		code = exit.ExitCode()
	default:
		t.Fatalf("sidecache %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return code, out.String(), errOut.String()
}

var (
	demoListening = regexp.MustCompile(`listening on (http://\S+)`)
	scListening   = regexp.MustCompile(`msg="sidecache listening" proxy=(http://\S+) admin=(http://\S+)`)
)

// startDemo runs the real demo-upstream on a free port and returns its URL.
func startDemo(t *testing.T) (*proc, string) {
	t.Helper()
	p := startProc(t, "demo-upstream", bins.demo, "-listen", "127.0.0.1:0", "-query-time", "1ms")
	url := p.waitOutput(demoListening)[1]
	// Asked directly, so that a broken stand-in is not reported as a
	// sidecache failure.
	if r, err := fetch(&http.Client{Timeout: 5 * time.Second}, url+"/self"); err != nil || r.code != 200 {
		t.Fatalf("demo-upstream does not answer GET /self itself (%+v, %v): the stand-in upstream (internal/demo) is broken, not sidecache", r, err)
	}
	return p, url
}

// sidecache is a running sidecache binary and its two listeners' URLs,
// read from its start-up log line (the config asks for port 0).
type sidecache struct {
	*proc
	proxy, admin string
}

func startSidecache(t *testing.T, cfgPath string) *sidecache {
	t.Helper()
	p := startProc(t, "sidecache", bins.sidecache, "-config", cfgPath)
	m := p.waitOutput(scListening)
	return &sidecache{proc: p, proxy: m[1], admin: m[2]}
}

// configTmpl is a small config on port-0 listeners; fill it with
// fmt.Sprintf(configTmpl, upstreamURL, clientTTL).
const configTmpl = `listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
upstream:
  url: %s
  timeout: 10s
shutdown_timeout: 10s
routes:
  - name: client
    methods: [GET]
    path: /clients/{id}
    ttl: %s
    tags: ["client:{id}"]
  - name: client-write
    methods: [PATCH, PUT, DELETE]
    path: /clients/{id}
    invalidate: ["client:{id}"]
`

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// response is what the tests read of an answer.
type response struct {
	code   int
	header http.Header
	body   string
}

func get(t *testing.T, c *http.Client, url string, header ...string) response {
	t.Helper()
	r, err := fetch(c, url, header...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fetch is get without the test, for load goroutines. header is name,
// value pairs.
func fetch(c *http.Client, url string, header ...string) (response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return response{}, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, fmt.Errorf("GET %s: read body: %w", url, err)
	}
	return response{resp.StatusCode, resp.Header, string(b)}, nil
}

// sample finds one sample in a Prometheus text exposition: the series
// called name whose labels include every name=value pair in labels.
func sample(exposition, name string, labels ...string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(exposition))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
lines:
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		n, lbls, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if !strings.Contains(","+lbls, ","+labels[i]+"="+strconv.Quote(labels[i+1])) {
				continue lines
			}
		}
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		return v, err == nil
	}
	return 0, false
}

// metricValue scrapes /metrics and returns one sample's value, failing the
// test if the series is absent.
func (s *sidecache) metricValue(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	r := get(t, http.DefaultClient, s.admin+"/metrics")
	v, ok := sample(r.body, name, labels...)
	if !ok {
		t.Fatalf("/metrics has no %s%v:\n%s", name, labels, r.body)
	}
	return v
}

// waitMetric polls /metrics until the sample equals want.
func (s *sidecache) waitMetric(t *testing.T, want float64, name string, labels ...string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := s.metricValue(t, name, labels...)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v after %v, want %v", name, labels, got, within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// withEnv sets or (KEY=) removes each of env in base.
func withEnv(base, env []string) []string {
	out := slices.Clone(base)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		out = slices.DeleteFunc(out, func(e string) bool { return strings.HasPrefix(e, k+"=") })
		if v != "" {
			out = append(out, kv)
		}
	}
	return out
}
