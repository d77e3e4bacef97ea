package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sidecache/sidecache/internal/admin"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/metrics"
	"github.com/sidecache/sidecache/internal/proxy"
	"github.com/sidecache/sidecache/internal/surrogate"
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
	m  *metrics.Metrics

	// every is the tags every stored entry carries (the routes'), whose
	// epochs a purge of everything raises (l2.Store.PurgeAll).
	every func() []string

	mu       sync.Mutex
	pending  map[string]pendingTag
	bytes    int           // the pending tags' length
	overflow bool          // tags were lost to the bound: purge L2 instead
	kick     chan struct{} // wakes the replay loop
	// refusedAt is when a replay was last refused for Redis taking no
	// write (l2.WritesRefused); the replay loop's alone.
	refusedAt time.Time
	held      held // what waits for the replay (hold.go)
}

// pendingTag is a tag waiting for the replay.
type pendingTag struct {
	gen   uint64    // the generation it was last added in (hold.go)
	tries int       // failed replays while Redis answered
	at    time.Time // when it was last added: after its write's answer
}

// The replay set's bounds. A write's tags come from its request, so a
// flood of writes while Redis is unreachable could grow the set, and every
// replay of it costs Redis a round trip of its size. It is de-duplicated
// (a map), bounded in tags and bytes, sent in chunks, and a tag that keeps
// failing while Redis answers (an error about that tag, not an outage) is
// given up after maxTries replays, counted by
// sidecache_invalidation_replays_abandoned_total. Tries are not counted
// while the breaker says Redis is down: an outage must not drop the
// invalidations it delayed. Past the bounds, the tags that do not fit are
// lost, and the next replay purges L2 as a whole instead, the one
// invalidation that still covers them (it empties the peers' L1s too, but
// only after invalidations were really lost, never for a flood of writes
// Redis took).
const (
	// refusedEvery is how many replay intervals apart the replays go
	// while Redis takes no write (replay).
	refusedEvery    = 4
	maxPending      = 100_000
	maxPendingBytes = 16 << 20
	maxTries        = 8
	replayChunk     = 256 // tags per round trip
)

func newInvalidator(l1s *l1.Store, l2s *l2.Store, hold time.Duration, m *metrics.Metrics, every func() []string) *invalidator {
	return &invalidator{
		l1: l1s, l2: l2s, m: m, every: every, pending: map[string]pendingTag{}, kick: make(chan struct{}, 1),
		held: held{hold: hold, late: m.InvalidationLate, sentCh: make(chan struct{})},
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
		if v.await(ctx, v.retryLater(tags), tags) {
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
	now := time.Now()
	for _, t := range tags {
		if p, ok := v.pending[t]; ok {
			v.pending[t] = pendingTag{gen: gen, tries: p.tries, at: now}
			continue
		}
		if len(v.pending) >= maxPending || v.bytes+len(t) > maxPendingBytes {
			v.overflow = true
			continue
		}
		v.pending[t] = pendingTag{gen: gen, at: now}
		v.bytes += len(t)
	}
	v.m.ReplayPending(len(v.pending))
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
		if time.Since(v.refusedAt) < refusedEvery*every {
			// Redis took no write at the last replay (l2.WritesRefused):
			// each replay publishes its tags' message again to every
			// replica, so for as long as a disk stays full it goes every
			// refusedEvery ticks (max_lag/2 by default), not every tick.
			// The raise lands within that of Redis taking writes again,
			// before a pod started then proves anything (3/4 max_lag).
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		v.flush(ctx, log)
		cancel()
	}
}

// flush sends the pending tags once, in chunks, reporting whether none are
// left.
func (v *invalidator) flush(ctx context.Context, log *slog.Logger) bool {
	v.mu.Lock()
	gen, overflow := v.held.added, v.overflow
	tags := make([]string, 0, len(v.pending))
	for tag := range v.pending {
		tags = append(tags, tag)
	}
	v.mu.Unlock()
	if overflow {
		if _, err := v.l2.PurgeAll(ctx, v.every()...); err != nil {
			return false
		}
		log.Warn("invalidations lost to the replay bound: purged l2", "tags", len(tags))
		v.mu.Lock()
		v.overflow = false
		v.forgetLocked(tags, gen)
		v.mu.Unlock()
		v.published(gen)
		return v.pendingCount() == 0
	}
	if len(tags) == 0 {
		v.published(gen)
		return true
	}
	ok := true
	for len(tags) > 0 {
		chunk := tags[:min(len(tags), replayChunk)]
		tags = tags[len(chunk):]
		err := v.l2.ReplayTags(ctx, v.addedAt(chunk), chunk...)
		if err == nil {
			v.mu.Lock()
			v.forgetLocked(chunk, gen)
			v.mu.Unlock()
			continue
		}
		ok = false
		if l2.WritesRefused(err) {
			v.refusedAt = time.Now()
		}
		if !v.l2.Up() || l2.WritesRefused(err) {
			// An outage, or Redis taking no write at all (a failed
			// snapshot, too few replicas: l2.WritesRefused) while it
			// answers: the rest would fail the same way, and no try
			// counts. Each failed replay tells the fleet again that a
			// raise was refused (l2's epochsRefused: a pod started
			// meanwhile sets its floor too), and the raise lands once
			// Redis takes writes; given up, it never did, and a pod
			// started afterwards read the note's old floor and served
			// the entry the write replaced from L2 until its TTL.
			break
		}
		// Redis answers, and refused these tags: count the try.
		var gaveUp []string
		v.mu.Lock()
		for _, tag := range chunk {
			if p, in := v.pending[tag]; in {
				if p.tries++; p.tries >= maxTries {
					v.gaveUpLocked(tag, p.gen) // its held writers are late (hold.go)
					gaveUp = append(gaveUp, tag)
				}
				v.pending[tag] = p
			}
		}
		v.forgetLocked(gaveUp, ^uint64(0))
		v.mu.Unlock()
		if len(gaveUp) > 0 {
			v.m.ReplayAbandoned(len(gaveUp))
			log.Warn("invalidations given up after repeated failures", "tags", len(gaveUp), "tries", maxTries, "err", err)
		}
	}
	if v.pendingUpTo(gen) == 0 {
		// Every tag of the copy was published or given up: the writes
		// waiting on them are answered (hold.go).
		v.published(gen)
	}
	if ok {
		log.Debug("invalidations replayed after l2 was unreachable")
	}
	return ok && v.pendingCount() == 0
}

// addedAt is when the latest of tags was added to the replay set (each
// after its write's answer): a refusal told to the fleet since covers them
// all (l2.Store.ReplayTags).
func (v *invalidator) addedAt(tags []string) time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	var at time.Time
	for _, t := range tags {
		if p := v.pending[t]; p.at.After(at) {
			at = p.at
		}
	}
	return at
}

// forgetLocked drops tags from the replay set unless they were added again
// after generation gen (the copy being replayed).
func (v *invalidator) forgetLocked(tags []string, gen uint64) {
	for _, tag := range tags {
		if p, ok := v.pending[tag]; ok && p.gen <= gen {
			delete(v.pending, tag)
			v.bytes -= len(tag)
		}
	}
	v.m.ReplayPending(len(v.pending))
}

// pendingUpTo counts the tags queued in generation gen or before.
func (v *invalidator) pendingUpTo(gen uint64) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, p := range v.pending {
		if p.gen <= gen {
			n++
		}
	}
	return n
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

// PurgeKey drops key, every variant and coding of it, and any fill of it
// in flight on any replica, and reports 1 when a tier held key, 0 when
// none did (so a typo in a key is not answered "purged"). A tier that
// cannot be read is still told to delete; its error is returned.
//
// Deleting the key alone is not enough (lenient for invalidation, strict
// for storage): a fill that began before the purge, here or on a peer,
// would store its pre-purge answer after it, and variants live under keys
// of their own. Entries carry no tag of their key, so the purge
// invalidates the key's path through its URI tag, as ?url= does: a
// tombstone here and on every peer refuses the fill's answer, the tag's
// epoch in L2 refuses it once stored, and every variant goes with it. It
// is wider than the one key (the path's other hosts and queries miss
// once), the price of a purge that a fill in flight cannot undo; Varnish's
// purge drops an object with all its variants too.
func (p *purger) PurgeKey(ctx context.Context, key string) (int, error) {
	var tags []string
	if path, ok := cachekey.Path(key); ok {
		tags = surrogate.EntryURITags(nil, path)
	}
	found := 0
	for _, st := range p.s.stores() {
		if e, ok, _ := st.Get(ctx, key); ok && e != nil {
			found = 1
			for _, t := range e.Tags {
				if strings.HasPrefix(t, surrogate.URITagPrefix) && !slices.Contains(tags, t) {
					tags = append(tags, t) // stored under a spelling of its own
				}
			}
		}
	}
	var errs []error
	if len(tags) > 0 {
		p.s.proxy.Invalidated(tags...)
		if _, err := p.s.inv.invalidate(ctx, tags...); err != nil {
			errs = append(errs, err)
		}
	}
	p.s.m.Invalidation("purge", 1)
	if err := p.s.tiers.Delete(ctx, key); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
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

// purgeAllBudget bounds a purge of everything: its invalidation (one
// pipeline) and its sweep of L2's keys, which on a large keyspace takes
// seconds. It stays under server.write_timeout's default (60s), so the
// answer reaches the operator. Past it the sweep stops and the answer
// says so; the purge holds all the same (l2.Store.PurgeAll).
const purgeAllBudget = 30 * time.Second

// PurgeAll drops every entry on every replica: tombstones and L1 here,
// then L2's invalidation of every route's tag and message to the peers,
// then L2's sweep (l2.Store.PurgeAll), within purgeAllBudget and the
// admin request's context.
func (p *purger) PurgeAll(ctx context.Context) (admin.AllPurged, error) {
	p.s.proxy.InvalidatedAll()
	if p.s.l1 != nil {
		p.s.l1.Clear()
	}
	p.s.m.Invalidation("purge", 1)
	if p.s.l2 == nil {
		return admin.AllPurged{Complete: true}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, purgeAllBudget)
	defer cancel()
	rep, err := p.s.l2.PurgeAll(ctx, p.s.routeTags()...)
	if err != nil {
		return admin.AllPurged{}, fmt.Errorf("purge: %w", err)
	}
	out := admin.AllPurged{Unlinked: rep.Unlinked, Retried: rep.Retried, Complete: rep.Complete}
	if !rep.Complete {
		out.Error = fmt.Sprintf("l2 sweep stopped after removing %d keys: %v; every entry is invalidated all the same, the keys left expire with their TTL", rep.Unlinked, rep.SweepErr)
		p.s.log.Warn("purge all: l2 sweep incomplete", "unlinked", rep.Unlinked, "retried", rep.Retried, "err", rep.SweepErr)
	}
	return out, nil
}

// routeTags are the implicit tags (proxy.RouteTag) of every route in
// force since the process started (servedRoutes): every stored entry
// carries its route's.
func (s *Server) routeTags() []string { return s.served.tags() }
