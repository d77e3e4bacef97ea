package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/config"
	"github.com/sidecache/sidecache/internal/server"
)

// origin is the service behind the sidecars: GET /clients/{id} answers
// "client-<id>-v<version>", PATCH bumps the version. It counts GETs.
type origin struct {
	*httptest.Server
	gets  atomic.Int64
	delay atomic.Int64 // ns each GET waits
	mu    sync.Mutex
	ver   map[string]int
}

func newOrigin(t testing.TB) *origin {
	o := &origin{ver: map[string]int{}}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/clients/")
		if r.Method == http.MethodGet {
			o.gets.Add(1)
			if d := o.delay.Load(); d > 0 {
				time.Sleep(time.Duration(d))
			}
		}
		o.mu.Lock()
		if r.Method == http.MethodPatch {
			o.ver[id]++
		}
		v := o.ver[id]
		o.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "client-%s-v%d", id, v)
	}))
	t.Cleanup(o.Close)
	return o
}

func body(id string, v int) string { return fmt.Sprintf("client-%s-v%d", id, v) }

const baseConfig = `
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  token: secret
upstream:
  url: %s
  timeout: 2s
cache:
  l1:
    max_bytes: 16MiB
%s
routes:
  - name: client
    path: /clients/{id}
    ttl: 5m
    stale_if_error: 10m
    tags: ["client:{id}"]
  - name: short
    path: /short/{id}
    ttl: 300ms
    stale_if_error: 10m
  - name: client-write
    methods: [PATCH, PUT, DELETE]
    path: /clients/{id}
    invalidate: ["client:{id}"]
`

func l2Block(cluster bool, addrs ...string) string {
	return fmt.Sprintf(`  l2:
    redis:
      addrs: [%s]
      cluster: %v
      timeout: 200ms
`, strings.Join(addrs, ", "), cluster)
}

// withUpstreamTimeout sets upstream.timeout in a config built on baseConfig.
func withUpstreamTimeout(t *testing.T, yaml, d string) string {
	t.Helper()
	if !strings.Contains(yaml, "  timeout: 2s\n") {
		t.Fatal("baseConfig no longer sets upstream.timeout: 2s")
	}
	return strings.Replace(yaml, "  timeout: 2s\n", "  timeout: "+d+"\n", 1)
}

// replica is one running sidecar.
type replica struct {
	srv   *server.Server
	proxy string // http://addr
	admin string
}

func startReplica(t testing.TB, upstreamURL, l2 string) *replica {
	t.Helper()
	return startReplicaYAML(t, fmt.Sprintf(baseConfig, upstreamURL, l2))
}

// startReplicaYAML runs a sidecar on a whole config of the test's own.
func startReplicaYAML(t testing.TB, yaml string) *replica {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return runServer(t, cfg, server.Options{Logger: slog.New(slog.DiscardHandler), WatchInterval: -1})
}

// runServer runs a sidecar until the test ends, and fails the test if it
// does not stop cleanly.
func runServer(t testing.TB, cfg *config.Config, opts server.Options) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		// The shared client's idle connections go first: one it dialed
		// for a request that then took another connection freed
		// meanwhile (the Transport's dial race, common on a loaded
		// machine) was never sent a request, and http.Server.Shutdown
		// waits 5 s before it counts such a connection idle.
		client.CloseIdleConnections()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return &replica{srv: srv, proxy: "http://" + srv.ProxyAddr(), admin: "http://" + srv.AdminAddr()}
}

var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

func (r *replica) do(t testing.TB, method, path string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	code, h, b, err := r.try(method, path, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return code, h, b
}

func (r *replica) try(method, path string, hdr ...string) (int, http.Header, string, error) {
	base := r.proxy
	if strings.HasPrefix(path, "admin:") {
		base, path = r.admin, strings.TrimPrefix(path, "admin:")
	}
	req, err := http.NewRequest(method, base+path, nil)
	if err != nil {
		return 0, nil, "", err
	}
	// Replicas sit behind one Service name; the key includes the Host.
	req.Host = "clients.svc"
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

func (r *replica) get(t testing.TB, path string) (string, string) {
	t.Helper()
	code, h, b := r.do(t, http.MethodGet, path)
	if code != 200 {
		t.Fatalf("GET %s: %d %q", path, code, b)
	}
	return b, h.Get("Cache-Status")
}

// askWithin GETs path through r and fails the test unless the answer
// comes within d (the test's client gives up after 10 s in any case).
func askWithin(t *testing.T, r *replica, d time.Duration, path string) (int, http.Header, string) {
	t.Helper()
	type answer struct {
		code int
		h    http.Header
		body string
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		code, h, body, err := r.try(http.MethodGet, path)
		done <- answer{code, h, body, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			t.Fatalf("GET %s: %v", path, a.err)
		}
		return a.code, a.h, a.body
	case <-time.After(d):
		t.Fatalf("GET %s: no answer within %v", path, d)
		return 0, nil, ""
	}
}

func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closeRefusing closes the origin and keeps its port refusing connections
// until the test ends: a socket bound to the port (SO_REUSEADDR, past the
// closed connections' TIME_WAIT) that never listens makes the kernel answer
// with RST, and no other process can take the port and answer instead.
func (o *origin) closeRefusing(t testing.TB) {
	t.Helper()
	addr := o.Listener.Addr().(*net.TCPAddr)
	o.Close()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: addr.Port}); err != nil {
		t.Fatalf("hold the origin's port %d: %v", addr.Port, err)
	}
}
