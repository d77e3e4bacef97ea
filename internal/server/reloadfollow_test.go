package server_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/sidecache/sidecache/internal/config"
	"github.com/sidecache/sidecache/internal/server"
)

// TestReloadMaxLagNamesOnlyWhatNeedsARestart: coherence.write_hold left
// out of the file is coherence.max_lag (config defaults), and both need a
// restart. A reload that changes max_lag alone names max_lag under
// restart_required, and not write_hold, which the file never set: the
// restart that applies max_lag moves write_hold with it. It named both.
// Once the file sets write_hold, a change of it is named.
func TestReloadMaxLagNamesOnlyWhatNeedsARestart(t *testing.T) {
	o := newOrigin(t)
	base := reloadParams{token: "t", level: "info", upstream: o.URL, timeout: "2s", ttl: "5m"}.yaml()
	path := filepath.Join(t.TempDir(), "sidecache.yaml")
	write := func(coherence string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(base+coherence), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("coherence: {max_lag: 1s}\n")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	r := runServer(t, cfg, server.Options{ConfigPath: path, WatchInterval: -1, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	fc := &fileConfig{replica: r, path: path}
	restartRequired := func() []string {
		var out []string
		for _, l := range logs.lines() {
			if v, ok := l["restart_required"].(string); ok {
				out = append(out, v)
			}
		}
		return out
	}
	for i, step := range []struct{ coherence, want string }{
		{"coherence: {max_lag: 2s}\n", "coherence.max_lag"},
		{"coherence: {max_lag: 2s, write_hold: 3s}\n", "coherence.max_lag,coherence.write_hold"},
		{"coherence: {max_lag: 1s, write_hold: 3s}\n", "coherence.write_hold"},
	} {
		write(step.coherence)
		if err := fc.srv.Reload(); err != nil {
			t.Fatal(err)
		}
		got := restartRequired()
		if len(got) != i+1 || got[i] != step.want {
			t.Fatalf("reload of %q: restart_required lines %q, want the last %q", step.coherence, got, step.want)
		}
	}
	wantReloads(t, fc, "0", "0", "3")
}
