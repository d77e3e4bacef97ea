package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/config"
	"github.com/sidecache/sidecache/internal/redistest"
	"github.com/sidecache/sidecache/internal/server"
)

// fileConfig is a sidecar whose config lives in a file the test rewrites
// and reloads by hand (no watcher), with its level and access log exposed.
type fileConfig struct {
	*replica
	path   string
	level  *slog.LevelVar
	access *syncBuffer
}

const reloadConfig = `
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  token: %s
log:
  format: json
  level: %s
  access: %v
upstream:
  url: %s
  timeout: %s
cache:
  l1:
    max_bytes: 16MiB
routes:
  - name: client
    path: /clients/{id}
    ttl: %s
`

type reloadParams struct {
	token, level string
	access       bool
	upstream     string
	timeout, ttl string
}

func (p reloadParams) yaml() string {
	return fmt.Sprintf(reloadConfig, p.token, p.level, p.access, p.upstream, p.timeout, p.ttl)
}

func startFromFile(t *testing.T, p reloadParams) *fileConfig {
	t.Helper()
	return startFromFileYAML(t, p.yaml())
}

// startFromFileYAML is startFromFile of a file with content yaml.
func startFromFileYAML(t *testing.T, yaml string) *fileConfig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sidecache.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	fc := &fileConfig{path: path, level: new(slog.LevelVar), access: &syncBuffer{}}
	fc.level.Set(slog.LevelInfo)
	fc.replica = runServer(t, cfg, server.Options{
		ConfigPath: path, WatchInterval: -1, Logger: slog.New(slog.DiscardHandler),
		Level: fc.level, AccessLog: server.NewLogger(fc.access, "json", slog.LevelInfo),
	})
	return fc
}

func (fc *fileConfig) rewrite(t *testing.T, content string) error {
	t.Helper()
	if err := os.WriteFile(fc.path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return fc.srv.Reload()
}

// reloads returns sidecache_config_reloads_total by result.
func (fc *fileConfig) reloads(t *testing.T) map[string]string {
	t.Helper()
	_, _, m := fc.do(t, http.MethodGet, "admin:/metrics")
	out := map[string]string{}
	for _, g := range regexp.MustCompile(`(?m)^sidecache_config_reloads_total\{result="([a-z_]+)"\} (\S+)$`).FindAllStringSubmatch(m, -1) {
		out[g[1]] = g[2]
	}
	return out
}

func wantReloads(t *testing.T, fc *fileConfig, success, errs, restart string) {
	t.Helper()
	got := fc.reloads(t)
	want := map[string]string{"success": success, "error": errs, "restart_required": restart}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sidecache_config_reloads_total = %v, want %v", got, want)
	}
}

func purgeStatus(t *testing.T, fc *fileConfig, token string) int {
	t.Helper()
	code, _, _ := fc.do(t, http.MethodPost, "admin:/purge?all=1", "Authorization", "Bearer "+token)
	return code
}

// TestReloadCountsSuccessErrorAndRestartRequired walks one sidecar through
// the three results: what reloads in place counts success, a change only a
// restart applies counts restart_required (and keeps the running value),
// and an invalid file counts error.
func TestReloadCountsSuccessErrorAndRestartRequired(t *testing.T) {
	o := newOrigin(t)
	p := reloadParams{token: "old", level: "info", upstream: o.URL, timeout: "2s", ttl: "5m"}
	fc := startFromFile(t, p)
	wantReloads(t, fc, "0", "0", "0")

	// In place: token, level, access log, TTL.
	p.token, p.level, p.access, p.ttl = "new", "debug", true, "7m"
	if err := fc.rewrite(t, p.yaml()); err != nil {
		t.Fatal(err)
	}
	wantReloads(t, fc, "1", "0", "0")
	if c := purgeStatus(t, fc, "old"); c != http.StatusUnauthorized {
		t.Errorf("purge with the old token after reload: %d, want 401", c)
	}
	if c := purgeStatus(t, fc, "new"); c != http.StatusOK {
		t.Errorf("purge with the new token after reload: %d, want 200", c)
	}
	if got := fc.level.Level(); got != slog.LevelDebug {
		t.Errorf("level after reload = %v, want DEBUG", got)
	}
	if _, cs := fc.get(t, "/clients/1"); !strings.Contains(cs, "stored") {
		t.Fatalf("Cache-Status %q, want a stored miss", cs)
	}
	if _, cs := fc.get(t, "/clients/1"); !strings.Contains(cs, "ttl=4") { // 7m = 420s
		t.Errorf("Cache-Status %q after a ttl change to 7m, want ttl=41x/420", cs)
	}
	if n := len(fc.access.lines()); n != 2 {
		t.Errorf("%d access lines after turning log.access on, want 2", n)
	}

	// Needs a restart: the upstream timeout (until the proxy can swap its
	// upstream) and the proxy listener. The running values stay.
	p.timeout = "3s"
	restart := strings.Replace(p.yaml(), "listen: 127.0.0.1:0\nadmin", "listen: 127.0.0.1:1\nadmin", 1)
	if err := fc.rewrite(t, restart); err != nil {
		t.Fatal(err)
	}
	wantReloads(t, fc, "1", "0", "1")
	if _, cs := fc.get(t, "/clients/1"); !strings.Contains(cs, "hit") {
		t.Errorf("after a restart-only change: Cache-Status %q, want the running sidecar still serving hits", cs)
	}

	// Invalid: counted error, nothing applied.
	bad := strings.Replace(p.yaml(), "token: new", "token: newer", 1)
	bad = strings.Replace(bad, "ttl: 7m", "ttl: soon", 1)
	if err := fc.rewrite(t, bad); err == nil {
		t.Fatal("reload of an invalid file returned nil")
	}
	wantReloads(t, fc, "1", "1", "1")
	if c := purgeStatus(t, fc, "new"); c != http.StatusOK {
		t.Errorf("purge with the running token after a failed reload: %d, want 200", c)
	}
}

// syncBuffer is an io.Writer the access log and the test share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) lines() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			m = map[string]any{"unparsed": l}
		}
		out = append(out, m)
	}
	return out
}

// TestReloadUpstreamTimeoutCarriesDefaultLeaseTTL: cache.l2.lease_ttl,
// unset, is upstream.timeout; a reload of the timeout applies it in place
// and the lease follows, with nothing reported as needing a restart. Set
// in the file, lease_ttl reloads in place too. Before: the lease kept the
// old timeout and the reload counted restart_required for
// cache.l2.lease_ttl, a field the operator never wrote.
func TestReloadUpstreamTimeoutCarriesDefaultLeaseTTL(t *testing.T) {
	rs := redistest.Start(t)
	o := newOrigin(t)
	p := reloadParams{token: "t", level: "info", upstream: o.URL, timeout: "2s", ttl: "5m"}
	withL2 := func(p reloadParams, extra string) string {
		return strings.Replace(p.yaml(), "cache:\n", "cache:\n"+l2Block(false, rs.Addr())+extra, 1)
	}
	fc := startFromFileYAML(t, withL2(p, ""))
	lease := func(want time.Duration) {
		t.Helper()
		if c, pr := fc.srv.RunningLeaseTTL(); c != want || pr != want {
			t.Fatalf("lease_ttl running: config %v, proxy %v; want %v", c, pr, want)
		}
	}
	lease(2 * time.Second)

	p.timeout = "3s"
	if err := fc.rewrite(t, withL2(p, "")); err != nil {
		t.Fatal(err)
	}
	wantReloads(t, fc, "1", "0", "0")
	lease(3 * time.Second)

	if err := fc.rewrite(t, withL2(p, "    lease_ttl: 7s\n")); err != nil {
		t.Fatal(err)
	}
	wantReloads(t, fc, "2", "0", "0")
	lease(7 * time.Second)
}
