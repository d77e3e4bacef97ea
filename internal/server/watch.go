package server

import (
	"context"
	"crypto/sha256"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/sidecache/sidecache/internal/proxy"
	"github.com/sidecache/sidecache/internal/route"
)

// configWatch is what the watcher knows of the config file, guarded by
// Server.reloadMu.
type configWatch struct {
	applied [sha256.Size]byte // the content last handed to a reload (or loaded at start)
	seen    [sha256.Size]byte // the content the previous poll read
	seenOK  bool              // the previous poll read the file
}

// watch polls the config file's content. Polling the resolved content
// rather than watching inodes is what survives a ConfigMap update, which
// swaps a symlink to a new directory instead of writing the file.
func (s *Server) watch(ctx context.Context) {
	every := s.opts.WatchInterval
	if every == 0 {
		every = 2 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.pollConfig()
	}
}

// pollConfig is one check of the file. It applies a content that differs
// from the one applied only once two consecutive polls read it the same,
// and reports whether it reloaded.
//
// A write is not atomic unless its writer makes it so: `cat > file` and
// `cp` truncate the file and then write it in pieces, and an editor that
// saves in place does the same, so a poll may read a file cut anywhere —
// often still valid YAML with its last routes or fields missing. Applied,
// such a file drops routes and invalidate rules until the next poll, and
// a write served meanwhile leaves stale what the missing rule covered.
// The settle rule costs one poll of delay on every change (a ConfigMap's
// symlink swap and an editor's write-then-rename are atomic and would not
// need it), and needs no clock: a file's mtime may be set by its writer
// (cp -p, rsync -t, a ConfigMap's projected files) and says nothing about
// whether the write finished. The limit: a writer that pauses longer than
// a whole poll interval in the middle of the file is indistinguishable
// from one that finished; write such files elsewhere and rename them into
// place, or reload with SIGHUP, which applies the file as it is.
//
// The content applied is the one the polls read, not a third read, so a
// write that starts after the second poll is not applied half done.
func (s *Server) pollConfig() bool {
	data, err := os.ReadFile(s.opts.ConfigPath)
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	w := &s.watched
	if err != nil {
		w.seenOK = false // mid-swap or removed: start over
		return false
	}
	sum := sha256.Sum256(data)
	settled := w.seenOK && sum == w.seen
	w.seen, w.seenOK = sum, true
	if sum == w.applied || !settled {
		return false
	}
	_ = s.applyLocked(data) // logged and counted inside
	return true
}

// startWatch records the file's content the process started from.
func (s *Server) startWatch() {
	if s.opts.ConfigPath == "" {
		return
	}
	if data, err := os.ReadFile(s.opts.ConfigPath); err == nil {
		s.watched.applied = sha256.Sum256(data)
		s.watched.seen, s.watched.seenOK = s.watched.applied, true
	}
}

// maxServedRoutes bounds the route names servedRoutes remembers.
const maxServedRoutes = 4096

// servedRoutes are the names of the routes in force since the process
// started, current ones last: a purge of everything raises the epoch of
// each one's implicit tag (PurgeAll), not only the current routes', since
// an entry a peer still on an older config stored (or this process before
// a reload) carries its own. A reload that retires a route drops its
// entries at once (retire.go), so past the bound the oldest retired names
// are forgotten: only a peer that has not yet reloaded could still store
// under them.
type servedRoutes struct {
	mu    sync.Mutex
	names []string
}

func (r *servedRoutes) add(t *route.Table) {
	cur := t.Routes()
	names := make([]string, 0, len(cur))
	for _, rt := range cur {
		names = append(names, rt.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := slices.DeleteFunc(r.names, func(n string) bool { return slices.Contains(names, n) })
	if extra := len(old) + len(names) - maxServedRoutes; extra > 0 {
		old = old[min(extra, len(old)):]
	}
	r.names = append(old, names...)
}

// tags are the implicit tags of the routes served (proxy.RouteTag).
func (r *servedRoutes) tags() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.names))
	for i, n := range r.names {
		out[i] = proxy.RouteTag(n)
	}
	return out
}
