package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"reflect"
	"time"

	"github.com/sidecache/sidecache/internal/config"
)

// Reload re-reads the config file and, when it is valid, swaps the route
// table (routes, TTLs, tags, batch settings) atomically: connections stay
// open and L1 keeps its entries. An invalid file keeps the old config, logs
// every problem and counts sidecache_config_reloads_total{result="error"}.
// Fields that need new sockets or clients (listen addresses, upstream, Redis)
// are reported as needing a restart and otherwise left as they were.
func (s *Server) Reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if s.opts.ConfigPath == "" {
		return fmt.Errorf("reload: no config file")
	}
	cfg, err := config.Load(s.opts.ConfigPath)
	if err == nil {
		var table = s.proxy.Routes()
		if table, err = compileRoutes(cfg.Routes); err == nil {
			old := s.cfg.Load()
			for _, f := range restartFields(old, cfg) {
				s.log.Warn("config reload: change needs a restart, keeping the running value", "field", f)
			}
			kept := *old
			kept.Routes = cfg.Routes
			kept.ShutdownTimeout, kept.ShutdownDelay = cfg.ShutdownTimeout, cfg.ShutdownDelay
			s.proxy.SetRoutes(table)
			s.cfg.Store(&kept)
		}
	}
	s.m.ConfigReload(err == nil)
	if err != nil {
		s.log.Error("config reload failed: keeping the running config", "file", s.opts.ConfigPath, "err", err)
		return fmt.Errorf("reload: %w", err)
	}
	s.log.Info("config reloaded", "file", s.opts.ConfigPath, "routes", len(cfg.Routes))
	return nil
}

func restartFields(a, b *config.Config) []string {
	var out []string
	check := func(name string, x, y any) {
		if !reflect.DeepEqual(x, y) {
			out = append(out, name)
		}
	}
	check("listen", a.Listen, b.Listen)
	check("admin", a.Admin, b.Admin)
	check("upstream", a.Upstream, b.Upstream)
	check("cache", a.Cache, b.Cache)
	return out
}

// watch polls the config file's content. Polling the resolved content
// rather than watching inodes is what survives a ConfigMap update, which
// swaps a symlink to a new directory instead of writing the file.
func (s *Server) watch(ctx context.Context) {
	every := s.opts.WatchInterval
	if every == 0 {
		every = 2 * time.Second
	}
	last := fileSum(s.opts.ConfigPath)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sum := fileSum(s.opts.ConfigPath)
		if sum == nil || bytes.Equal(sum, last) {
			continue
		}
		last = sum
		_ = s.Reload() // logged and counted inside
	}
}

func fileSum(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	h := sha256.Sum256(b)
	return h[:]
}
