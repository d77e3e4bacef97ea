package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/config"
)

// Reload re-reads the config file and, when it is valid, applies in place
// what can be: the route table (routes, TTLs, tags, batch settings, swapped
// atomically: connections stay open and L1 keeps its entries), the admin
// token, log.level, log.access and the shutdown timings. Every other change
// (listen addresses, server timeouts, upstream, Redis and the cache sizes,
// log.format, ...) needs new sockets, clients or stores: it is logged, the
// running value is kept, and the reload counts
// sidecache_config_reloads_total{result="restart_required"}, so an alert can
// say the process no longer matches its file. An invalid file keeps the old
// config, logs every problem and counts result="error".
func (s *Server) Reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if s.opts.ConfigPath == "" {
		return fmt.Errorf("reload: no config file")
	}
	cfg, err := config.Load(s.opts.ConfigPath)
	if err != nil {
		return s.reloadFailed(err)
	}
	table, err := compileRoutes(cfg.Routes)
	if err != nil {
		return s.reloadFailed(err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Log.Level)); err != nil {
		return s.reloadFailed(fmt.Errorf("log.level: %w", err))
	}

	old := s.cfg.Load()
	applied := *old
	applied.Routes = cfg.Routes
	applied.Admin.Token = cfg.Admin.Token
	applied.Log.Level, applied.Log.Access = cfg.Log.Level, cfg.Log.Access
	applied.Log.RedactQuery = cfg.Log.RedactQuery
	applied.ShutdownTimeout, applied.ShutdownDelay = cfg.ShutdownTimeout, cfg.ShutdownDelay
	up, err := url.Parse(cfg.Upstream.URL)
	if err != nil {
		return s.reloadFailed(fmt.Errorf("upstream.url: %w", err))
	}
	if cfg.Upstream.URL != old.Upstream.URL || cfg.Upstream.Timeout != old.Upstream.Timeout {
		if err := s.proxy.SetUpstream(up, cfg.Upstream.Timeout.D()); err != nil {
			return s.reloadFailed(err)
		}
		applied.Upstream.URL, applied.Upstream.Timeout = cfg.Upstream.URL, cfg.Upstream.Timeout
	}

	s.proxy.SetRoutes(table)
	if s.opts.Level != nil {
		s.opts.Level.Set(level)
	}
	s.cfg.Store(&applied)

	restart := changedFields(reflect.ValueOf(applied), reflect.ValueOf(*cfg), "")
	if len(restart) > 0 {
		s.m.ConfigReloadNeedsRestart()
		s.log.Warn("config reloaded in part: the other changes need a restart, keeping their running values",
			"file", s.opts.ConfigPath, "restart_required", strings.Join(restart, ","))
		return nil
	}
	s.m.ConfigReload(true)
	s.log.Info("config reloaded", "file", s.opts.ConfigPath, "routes", len(cfg.Routes))
	return nil
}

func (s *Server) reloadFailed(err error) error {
	s.m.ConfigReload(false)
	s.log.Error("config reload failed: keeping the running config", "file", s.opts.ConfigPath, "err", err)
	return fmt.Errorf("reload: %w", err)
}

// changedFields lists, by their YAML paths, the fields where a and b (two
// values of one config type) differ, descending into structs and pointers
// to structs. A field added to config later is thus a restart field until
// Reload applies it, never silently ignored.
func changedFields(a, b reflect.Value, prefix string) []string {
	if a.Kind() == reflect.Pointer {
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return []string{prefix}
			}
			return nil
		}
		a, b = a.Elem(), b.Elem()
	}
	if a.Kind() != reflect.Struct {
		if reflect.DeepEqual(a.Interface(), b.Interface()) {
			return nil
		}
		return []string{prefix}
	}
	var out []string
	for i := range a.NumField() {
		f := a.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if prefix != "" {
			name = prefix + "." + name
		}
		out = append(out, changedFields(a.Field(i), b.Field(i), name)...)
	}
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
