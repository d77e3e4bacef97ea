package server

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/config"
)

// Reload re-reads the config file and, when it is valid, applies in place
// what can be: the route table (routes, TTLs, tags, batch settings, swapped
// atomically: connections stay open and L1 keeps the entries of the routes
// that store and tag as before), the admin
// token, log.level, log.access, the shutdown timings, upstream.url and
// upstream.timeout, cache.l2.lease_ttl, server.max_connections and
// server.max_pending_send_bytes and server.max_pending_header_bytes. Every
// other change
// (listen addresses, server timeouts, upstream, Redis and the cache sizes,
// log.format, ...) needs new sockets, clients or stores: it is logged, the
// running value is kept, and the reload counts
// sidecache_config_reloads_total{result="restart_required"}, so an alert can
// say the process no longer matches its file. An invalid file keeps the old
// config, logs every problem and counts result="error".
//
// A route renamed, removed, or whose key, tags or precedence changed, and
// one whose entries an invalidate rule the file gains may reach, has its
// stored entries dropped on every replica (retire.go), so that what the
// sidecar serves after a reload is what the new routes stored, tagged as
// they tag, reached by their purges and their write routes.
func (s *Server) Reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if s.opts.ConfigPath == "" {
		return fmt.Errorf("reload: no config file")
	}
	data, err := os.ReadFile(s.opts.ConfigPath)
	if err != nil {
		return s.reloadFailed(fmt.Errorf("config: %w", err))
	}
	return s.applyLocked(data)
}

// applyLocked is Reload of the file's content data, with reloadMu held.
//
// The content applied is also the watcher's last reading (configWatch):
// a SIGHUP's read is one more look at the file. Left at what the poll
// before it read, a rewrite of the file caught by the next poll at the
// same cut as that earlier poll (a writer's fixed-size pieces cut it at
// the same byte) read as settled after one poll, and was applied half
// written (TestWatchAfterReloadAppliesOnlySettledContent).
func (s *Server) applyLocked(data []byte) error {
	sum := sha256.Sum256(data)
	s.watched.applied, s.watched.seen, s.watched.seenOK = sum, sum, true
	cfg, err := config.Parse(data, s.opts.ConfigPath)
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
	// cache.l2.lease_ttl is only the proxy's wait for a holder, and
	// unset it is upstream.timeout (config defaults): it follows a
	// reloaded timeout, or its own new value, in place. Otherwise the
	// lease would keep the old timeout and the reload would report a
	// restart for a field the operator never wrote.
	if ol, nl := old.Cache.L2, cfg.Cache.L2; ol != nil && nl != nil && ol.LeaseTTL != nl.LeaseTTL {
		if ol.Lease == nil || *ol.Lease {
			s.proxy.SetLeaseTTL(nl.LeaseTTL.D())
		}
		l2 := *ol // old's is shared with readers of s.cfg
		l2.LeaseTTL = nl.LeaseTTL
		applied.Cache.L2 = &l2
	}

	// Entries the new routes must not serve (retire.go) are refused from
	// before the swap, and dropped after it: a fill the old table began
	// in between is refused by the second tombstone and by L2's epoch.
	prev := s.proxy.Routes()
	retire := retired(prev, table, len(old.Cache.TagHeaders) > 0)
	if len(retire) > 0 {
		s.proxy.Invalidated(retire...)
	}
	s.proxy.SetRoutes(table)
	s.served.add(table)
	if len(retire) > 0 {
		s.retireRoutes(retire)
	}
	if s.opts.Level != nil {
		s.opts.Level.Set(level)
	}
	if n := cfg.Server.MaxConnections; n != old.Server.MaxConnections {
		s.conns.SetMax(n) // a slot count: no socket to replace
		applied.Server.MaxConnections = n
	}
	if n := cfg.Server.MaxPendingSendBytes; n != old.Server.MaxPendingSendBytes {
		s.sends.SetMax(n.Bytes()) // a count: lowered, what is over it is cut now
		applied.Server.MaxPendingSendBytes = n
	}
	if n := cfg.Server.MaxPendingHeaderBytes; n != old.Server.MaxPendingHeaderBytes {
		s.heads.SetMax(n.Bytes()) // a count: lowered, what is over it is cut now
		applied.Server.MaxPendingHeaderBytes = n
	}
	s.cfg.Store(&applied)

	restart := withoutFollowers(changedFields(reflect.ValueOf(applied), reflect.ValueOf(*cfg), ""), old, cfg)
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

// withoutFollowers is restart less each field that follows another
// (config.Follows: coherence.write_hold is coherence.max_lag when left
// out) in the running file and in the new one, when that other field is
// listed: the operator changed the source alone, and the restart that
// applies it moves the follower with it. Listed too, a reload of max_lag
// named write_hold under restart_required, a field the file never set.
// A follower the new file sets, or the running one set, stays listed
// when it changes.
func withoutFollowers(restart []string, running, cur *config.Config) []string {
	var out []string
	for _, path := range restart {
		src, follows := cur.Follows(path)
		_, followed := running.Follows(path)
		if follows && followed && slices.Contains(restart, src) {
			continue
		}
		out = append(out, path)
	}
	return out
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
		if !f.IsExported() {
			continue // not a field of the file (config.Config's defaulted)
		}
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

// retireBudget bounds a reload's invalidation of retired routes; Redis
// unreachable, the tags wait in the invalidator's replay as a write's do.
const retireBudget = 10 * time.Second

// retireRoutes drops the entries of the retired routes' tags here, in L2
// and on every peer, as POST /purge?route= does, counted as a purge.
func (s *Server) retireRoutes(tags []string) {
	s.proxy.Invalidated(tags...)
	s.m.Invalidation("purge", len(tags))
	ctx, cancel := context.WithTimeout(context.Background(), retireBudget)
	defer cancel()
	n, err := s.inv.invalidate(ctx, tags...)
	if err != nil {
		s.log.Warn("config reload: dropping the entries of retired routes: will retry", "tags", tags, "err", err)
		return
	}
	s.log.Info("config reload: dropped the entries of retired routes", "tags", tags, "purged", n)
}
