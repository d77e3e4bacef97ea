package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sidecache/sidecache/internal/admin"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/proxy"
)

// invalidator drops tags here first (so this replica reads its own write at
// once), then in L2, which tells the peers. A write that reached the
// upstream must not lose its invalidation because Redis was unreachable at
// that moment: failed tags are kept and replayed until L2 takes them, so
// neither L2 nor a peer's L1 keeps the old body for the rest of its TTL.
//
// There is no second, delayed pass ("double delete"): a peer's fetch that
// began before the write and stores its answer in L2 after it is refused
// by the tag's epoch, which L2 checks on every read.
type invalidator struct {
	l1 *l1.Store
	l2 *l2.Store

	mu      sync.Mutex
	pending map[string]uint64 // tag -> the generation it was last added in
	kick    chan struct{}     // wakes the replay loop
	held    held              // what waits for the replay (hold.go)
}

// maxPending bounds the replay set; past it, the next replay purges L2 as a
// whole, the only invalidation that still covers everything that was lost.
const maxPending = 100_000

func newInvalidator(l1s *l1.Store, l2s *l2.Store, hold time.Duration, late func()) *invalidator {
	return &invalidator{
		l1: l1s, l2: l2s, pending: map[string]uint64{}, kick: make(chan struct{}, 1),
		held: held{hold: hold, late: late, sentCh: make(chan struct{})},
	}
}

func (v *invalidator) InvalidateTags(ctx context.Context, tags ...string) error {
	_, err := v.invalidate(ctx, tags...)
	return err
}

// invalidate is InvalidateTags reporting how many L1 entries it dropped
// (the admin API's purge answers with that count).
func (v *invalidator) invalidate(ctx context.Context, tags ...string) (int, error) {
	n := 0
	if v.l1 != nil {
		n = v.l1.DeleteTags(tags...)
	}
	if v.l2 == nil {
		return n, nil
	}
	if err := v.l2.InvalidateTags(ctx, tags...); err != nil {
		if v.await(ctx, v.retryLater(tags)) {
			return n, nil // published by the replay within coherence.write_hold
		}
		return n, fmt.Errorf("invalidate: answered before it was published, will retry: %w", err)
	}
	return n, nil
}

// retryLater queues tags for the replay loop and returns their generation
// (hold.go).
func (v *invalidator) retryLater(tags []string) uint64 {
	v.mu.Lock()
	if v.held.sent == v.held.added {
		v.held.since = time.Now()
	}
	v.held.added++
	gen := v.held.added
	for _, t := range tags {
		v.pending[t] = gen
	}
	v.mu.Unlock()
	select {
	case v.kick <- struct{}{}:
	default:
	}
	return gen
}

// replay retries the pending tags every interval (or at once when kicked)
// until stop is closed, then makes one last attempt, so that the writes
// answered just before a shutdown do not lose their invalidation. It tries
// whether or not the breaker is open: a Redis that answers again must get
// the invalidations before this replica's peers trust their channel again.
func (v *invalidator) replay(stop <-chan struct{}, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if !v.flush(ctx, log) {
				log.Warn("invalidations lost at shutdown: redis unreachable", "tags", v.pendingCount())
			}
			return
		case <-v.kick:
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		v.flush(ctx, log)
		cancel()
	}
}

// flush sends the pending tags once, reporting whether none are left.
func (v *invalidator) flush(ctx context.Context, log *slog.Logger) bool {
	v.mu.Lock()
	gen := v.held.added
	tags := make([]string, 0, len(v.pending))
	for tag := range v.pending {
		tags = append(tags, tag)
	}
	v.mu.Unlock()
	if len(tags) == 0 {
		v.published(gen)
		return true
	}
	var err error
	if len(tags) > maxPending {
		err = v.l2.PurgeAll(ctx)
	} else {
		err = v.l2.InvalidateTags(ctx, tags...)
	}
	if err != nil {
		return false
	}
	v.mu.Lock()
	for _, tag := range tags {
		if v.pending[tag] <= gen { // not added again since the copy
			delete(v.pending, tag)
		}
	}
	v.mu.Unlock()
	v.published(gen)
	log.Debug("invalidations replayed after l2 was unreachable", "tags", len(tags))
	return true
}

func (v *invalidator) pendingCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.pending)
}

// peerInvalidation applies another replica's invalidation to this L1.
func (s *Server) peerInvalidation(inv l2.Invalidation) {
	h := s.live.Load()
	if h == nil {
		return // still starting: nothing has been fetched yet
	}
	// Tombstones first, and even without an L1: they stop a fetch that
	// began before the peer's write from being stored (in L2) afterwards.
	n := 0
	switch {
	case inv.All && inv.Gap:
		// The subscription was rebuilt: messages may have been lost. L1
		// stays, and no tombstone either (it would refuse every entry for
		// its window): the tiers stop trusting the proof for entries whose
		// request left before the gap's end (l2's Floor) and serve those
		// only while younger than max_lag, which the promise allows.
		n = 1
	case inv.All:
		h.InvalidatedAll()
		if s.l1 != nil {
			s.l1.Clear()
		}
		n = 1
	default:
		h.Invalidated(inv.Tags...)
		if s.l1 != nil {
			n += s.l1.DeleteTags(inv.Tags...)
			if len(inv.Keys) > 0 {
				_ = s.l1.Delete(context.Background(), inv.Keys...)
				n += len(inv.Keys)
			}
		}
	}
	s.m.Invalidation("peer", max(n, 1))
}

// purger serves the admin API's POST /purge.
type purger struct{ s *Server }

func (p *purger) PurgeTag(ctx context.Context, tag string) (int, error) {
	return p.purgeTags(ctx, tag)
}

func (p *purger) PurgeRoute(ctx context.Context, route string) (int, error) {
	if p.s.proxy.Routes().Route(route) == nil {
		return 0, fmt.Errorf("purge: route %q: %w", route, admin.ErrNotFound)
	}
	return p.purgeTags(ctx, proxy.RouteTag(route))
}

func (p *purger) purgeTags(ctx context.Context, tags ...string) (int, error) {
	p.s.proxy.Invalidated(tags...)
	p.s.m.Invalidation("purge", len(tags))
	n, err := p.s.inv.invalidate(ctx, tags...)
	if err != nil {
		return n, fmt.Errorf("purge: %w", err)
	}
	return n, nil
}

// PurgeKey deletes key from both tiers and reports 1 when a tier held it,
// 0 when none did (so a typo in a key is not answered "purged"). A tier that
// cannot be read is still told to delete; its error is returned.
func (p *purger) PurgeKey(ctx context.Context, key string) (int, error) {
	p.s.m.Invalidation("purge", 1)
	found := 0
	for _, st := range p.s.stores() {
		if e, ok, _ := st.Get(ctx, key); ok && e != nil {
			found = 1
		}
	}
	if err := p.s.tiers.Delete(ctx, key); err != nil {
		return found, fmt.Errorf("purge: %w", err)
	}
	return found, nil
}

// stores are the configured tiers, L1 first, read directly: not through
// Tiered, whose lookups count in the metrics, promote into L1 and hide
// entries the coherence bound refuses.
func (s *Server) stores() []cache.Store {
	var out []cache.Store
	if s.l1 != nil {
		out = append(out, s.l1)
	}
	if s.l2 != nil {
		out = append(out, s.l2)
	}
	return out
}

func (p *purger) PurgeAll(ctx context.Context) error {
	p.s.proxy.InvalidatedAll()
	if p.s.l1 != nil {
		p.s.l1.Clear()
	}
	p.s.m.Invalidation("purge", 1)
	if p.s.l2 != nil {
		if err := p.s.l2.PurgeAll(ctx); err != nil {
			return fmt.Errorf("purge: %w", err)
		}
	}
	return nil
}
