package cache

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Tier names a cache tier in metrics and Cache-Status details.
type Tier string

const (
	TierL1 Tier = "l1"
	TierL2 Tier = "l2"
)

// Result is the outcome of one tier's lookup, for sidecache_cache_lookups_total.
type Result string

const (
	ResultHit   Result = "hit"
	ResultMiss  Result = "miss"
	ResultError Result = "error"
)

// TieredOptions configures a Tiered.
type TieredOptions struct {
	// Observe, if set, is called once for every tier a lookup consults.
	Observe func(tier Tier, result Result)
	// Now is the clock entries are judged by; nil is time.Now.
	Now func() time.Time

	// MaxLag and Proven bound how stale a hit may be while this replica
	// cannot prove that it hears its peers' invalidations (coherence.max_lag;
	// see l2's heartbeat). Proven is when the invalidation channel was last
	// proven to deliver. While that is more than MaxLag ago, a hit from
	// either tier is served only if its upstream request left less than
	// MaxLag ago; older entries are misses. Nil Proven or zero MaxLag: no
	// bound (a replica without L2 has no peers to hear).
	MaxLag time.Duration
	Proven func() time.Time
	// Floor, if set, is when the channel was last resubscribed after a
	// gap: invalidations published before it may have been lost, so
	// Proven vouches only for entries whose request left after it; older
	// ones are served only while younger than MaxLag. This keeps L1 across
	// a resubscribe instead of emptying it.
	Floor func() time.Time
	// Refused, if set, is called for every entry a tier held that the
	// MaxLag bound refused (it also counts as that tier's miss), so an
	// operator sees what unproven coherence costs.
	Refused func(tier Tier)
	// Keep, if set, is asked of every entry Set writes and every L2 hit
	// Lookup copies into L1 (promote), under L1's lock right before the
	// write (before L2's when there is no L1): false refuses it, and no
	// tier is written (Set returns ErrStale). The proxy answers from its
	// tombstones: an entry requested before an invalidation of one of
	// its tags that this replica has applied. Checked only before the
	// write, an L2 hit whose reply was read after a peer's invalidation
	// of it was applied (its epoch raised after Redis read it) was
	// copied into L1 after L1's DeleteTags had passed, and served from
	// there once the tombstones lapsed, for the rest of its ttl.
	Keep func(e *Entry) bool
}

// Tiered is a Store made of a fast local tier (L1) in front of a shared one
// (L2). Either may be nil: L1-only, L2-only, or a Store that keeps nothing.
type Tiered struct {
	l1, l2  Store
	l2At    atGetter // l2's GetAt, when it has one and now is the real clock
	observe func(Tier, Result)
	now     func() time.Time
	maxLag  time.Duration
	proven  func() time.Time
	floor   func() time.Time
	refused func(Tier)
	keep    func(*Entry) bool
}

var _ Store = (*Tiered)(nil)

// NewTiered composes l1 and l2. Pass an untyped nil for a missing tier: a
// nil pointer of a concrete store type is a non-nil Store and will be used.
func NewTiered(l1, l2 Store, opts TieredOptions) *Tiered {
	t := &Tiered{l1: l1, l2: l2, observe: opts.Observe, now: opts.Now, maxLag: opts.MaxLag, proven: opts.Proven, floor: opts.Floor, refused: opts.Refused, keep: opts.Keep}
	if t.refused == nil {
		t.refused = func(Tier) {}
	}
	if t.maxLag <= 0 {
		t.proven = nil
	}
	if t.observe == nil {
		t.observe = func(Tier, Result) {}
	}
	if t.now == nil {
		t.now = time.Now
		t.l2At, _ = l2.(atGetter)
	}
	return t
}

// atGetter is what lookup uses of L2 when it has it (l2.Store): Get with
// the clock reading the lookup judges the entry by, which the store counts
// its timeout from instead of reading the clock again. Only with the real
// clock (TieredOptions.Now nil): a test's clock is no deadline's.
type atGetter interface {
	GetAt(ctx context.Context, key string, now time.Time) (*Entry, bool, error)
}

// Lookup reads L1, then L2, and reports which tier answered ("" on a miss).
// An L2 hit is copied into L1, which keeps it only for the entry's remaining
// lifetime. An entry with no lifetime left counts as that tier's miss.
//
// An L1 entry past its freshness (kept for its stale windows) does not
// shadow L2: another replica may have refreshed the key there, so L2 is
// read too and the newer of the two wins. Otherwise every replica holding
// a stale copy would refetch what one of them already has.
//
// A failing tier is observed as an error and skipped. If no tier hits, the
// failure is returned with the miss (nil entry), and the caller goes on
// without the cache; a hit is returned without error, since the caller has
// what it needs and Observe has already recorded the failure. A stale L1
// copy returned because L2 failed comes with L2's error: the caller's miss
// then knows that L2 was not read, and asks it for nothing more (the
// proxy takes no lease after a failed read, so a stalled Redis costs a
// request one timeout, not two).
func (t *Tiered) Lookup(ctx context.Context, key string) (*Entry, Tier, error) {
	now := t.now()
	var errs []error
	var stale *Entry
	if t.l1 != nil {
		e, err := t.lookup(ctx, TierL1, t.l1, key, now)
		switch {
		case err != nil:
			errs = append(errs, err)
		case e != nil && (e.Fresh(now) || t.l2 == nil):
			return e, TierL1, nil
		default:
			stale = e
		}
	}
	if t.l2 != nil {
		e, err := t.lookup(ctx, TierL2, t.l2, key, now)
		if err != nil {
			errs = append(errs, err)
		} else if e != nil && (stale == nil || e.StoredAt.After(stale.StoredAt)) {
			t.promote(ctx, key, e)
			return e, TierL2, nil
		}
	}
	if stale != nil {
		return stale, TierL1, errors.Join(errs...)
	}
	return nil, "", errors.Join(errs...)
}

// manyGetter is what LookupMany uses of L2 when it has it: one round trip
// for many keys.
type manyGetter interface {
	GetMany(ctx context.Context, keys []string) ([]*Entry, error)
}

// LookupMany reads many keys: L1 for each, then the L2 misses together in
// one round trip when L2 can (a list request must not cost one L2 round
// trip per id). A nil element is a miss; L2 hits fill L1.
func (t *Tiered) LookupMany(ctx context.Context, keys []string) ([]*Entry, []Tier, error) {
	now := t.now()
	out := make([]*Entry, len(keys))
	tiers := make([]Tier, len(keys))
	var missing []int
	for i, k := range keys {
		if t.l1 != nil {
			if e, _ := t.lookup(ctx, TierL1, t.l1, k, now); e != nil {
				out[i], tiers[i] = e, TierL1
				continue
			}
		}
		missing = append(missing, i)
	}
	if t.l2 == nil || len(missing) == 0 {
		return out, tiers, nil
	}
	mg, ok := t.l2.(manyGetter)
	if !ok {
		var errs []error
		for _, i := range missing {
			e, err := t.lookup(ctx, TierL2, t.l2, keys[i], now)
			errs = append(errs, err)
			if e != nil {
				out[i], tiers[i] = e, TierL2
				t.promote(ctx, keys[i], e)
			}
		}
		return out, tiers, errors.Join(errs...)
	}
	mkeys := make([]string, len(missing))
	for j, i := range missing {
		mkeys[j] = keys[i]
	}
	es, err := mg.GetMany(ctx, mkeys)
	if err != nil {
		for range missing {
			t.observe(TierL2, ResultError)
		}
		return out, tiers, fmt.Errorf("cache: l2 get many: %w", err)
	}
	for j, i := range missing {
		e := es[j]
		if e == nil || e.Remaining(now) == 0 || !t.coherent(e, now) {
			t.observe(TierL2, ResultMiss)
			if e != nil && e.Remaining(now) > 0 {
				t.refused(TierL2)
			}
			continue
		}
		t.observe(TierL2, ResultHit)
		out[i], tiers[i] = e, TierL2
		t.promote(ctx, keys[i], e)
	}
	return out, tiers, nil
}

// promote copies an L2 hit into L1. L1 sets its own TTL from e (what is
// left of its lifetime); an L1 that cannot store it only costs the next
// lookup a trip to L2. L2 decodes an entry's body in place, a slice of the
// Redis reply (UnmarshalOwned), which also holds the reply's framing and
// the entry's encoded fields, and for a multi-key read its siblings: kept
// in L1 that memory would outlive the request uncounted by Size, so the
// kept copy has a body of its own, exactly as long as it.
func (t *Tiered) promote(ctx context.Context, key string, e *Entry) {
	if t.l1 == nil {
		return
	}
	if body := e.OwnBody(); len(body) > 0 && &body[0] != &e.Body[0] {
		c := *e
		c.Body, c.lent = body, false
		e = &c
	}
	_ = t.setL1(ctx, key, e)
}

// keepSetter is what setL1 uses of L1 when it has it (l1.Store): a Set
// that asks keep under the lock its tag invalidation takes.
type keepSetter interface {
	SetKeep(ctx context.Context, key string, e *Entry, keep func(*Entry) bool) error
}

// setL1 writes e to L1, asking Keep first (TieredOptions.Keep): under
// L1's lock when it can, so that no invalidation applied before the
// write is missed; ErrStale when Keep refuses e.
func (t *Tiered) setL1(ctx context.Context, key string, e *Entry) error {
	if t.keep == nil {
		return t.l1.Set(ctx, key, e)
	}
	if ks, ok := t.l1.(keepSetter); ok {
		return ks.SetKeep(ctx, key, e, t.keep)
	}
	if !t.keep(e) {
		return ErrStale
	}
	return t.l1.Set(ctx, key, e)
}

// LookupLocal consults L1 only. The proxy reads L1 before joining a flight
// and leaves L2 to the flight's one leader, so a burst of misses for one
// key costs one L2 round trip per replica, not one per request.
func (t *Tiered) LookupLocal(ctx context.Context, key string) (*Entry, Tier, error) {
	if t.l1 == nil {
		return nil, "", nil
	}
	e, err := t.lookup(ctx, TierL1, t.l1, key, t.now())
	if e == nil {
		return nil, "", err
	}
	return e, TierL1, nil
}

// LookupShared consults L2 only, as Lookup does after an L1 miss (an L2
// hit fills L1): for a flight's leader that read L1 just before it joined
// the flight and knows that nothing has filled it since, so that its miss
// does not cost a second L1 read.
func (t *Tiered) LookupShared(ctx context.Context, key string) (*Entry, Tier, error) {
	if t.l2 == nil {
		return nil, "", nil
	}
	e, err := t.lookup(ctx, TierL2, t.l2, key, t.now())
	if e == nil {
		return nil, "", err
	}
	t.promote(ctx, key, e)
	return e, TierL2, nil
}

func (t *Tiered) lookup(ctx context.Context, tier Tier, s Store, key string, now time.Time) (*Entry, error) {
	var (
		e   *Entry
		ok  bool
		err error
	)
	if tier == TierL2 && t.l2At != nil {
		e, ok, err = t.l2At.GetAt(ctx, key, now)
	} else {
		e, ok, err = s.Get(ctx, key)
	}
	switch {
	case err != nil:
		t.observe(tier, ResultError)
		return nil, fmt.Errorf("cache: %s get: %w", tier, err)
	case !ok || e == nil || e.Remaining(now) == 0:
		t.observe(tier, ResultMiss)
		return nil, nil
	case !t.coherent(e, now):
		t.observe(tier, ResultMiss)
		t.refused(tier)
		return nil, nil
	default:
		t.observe(tier, ResultHit)
		return e, nil
	}
}

// coherent reports whether e may be served by a read starting at now
// without breaking the promise that a read starting more than MaxLag after
// a write's acknowledgement never gets the version the write replaced.
// While the channel is proven within MaxLag, every invalidation of a write
// acknowledged more than MaxLag ago has been applied here (and to L2), so
// any entry may be served — any whose request left after the Floor, since
// invalidations published before the last resubscribe may have been lost.
// Otherwise only an entry whose request left less than MaxLag ago: it was
// fetched after any such write.
func (t *Tiered) coherent(e *Entry, now time.Time) bool {
	if t.proven == nil {
		return true
	}
	horizon := now.Add(-t.maxLag)
	if e.StoredAt.After(horizon) {
		return true
	}
	if t.floor != nil && e.StoredAt.Before(t.floor()) {
		return false
	}
	return t.proven().After(horizon)
}

// Get implements Store through Lookup.
func (t *Tiered) Get(ctx context.Context, key string) (*Entry, bool, error) {
	e, _, err := t.Lookup(ctx, key)
	return e, e != nil, err
}

// Set writes L1, then L2 (whose own Set may return before Redis has the
// entry). A failing tier does not stop the other; the errors are joined.
var errNoTier = errors.New("cache: no tier configured")

// Set (see above) writes no tier when TieredOptions.Keep refuses e, and
// returns ErrStale.
func (t *Tiered) Set(ctx context.Context, key string, e *Entry) error {
	var err1, err2 error
	if t.l1 != nil {
		if err := t.setL1(ctx, key, e); errors.Is(err, ErrStale) {
			return err // predates an invalidation: no tier
		} else if err != nil {
			err1 = fmt.Errorf("cache: l1 set: %w", err)
		}
	} else if t.keep != nil && !t.keep(e) {
		return ErrStale
	}
	if t.l2 != nil {
		if err := t.l2.Set(ctx, key, e); err != nil {
			err2 = fmt.Errorf("cache: l2 set: %w", err)
		}
	}
	return t.stored(err1, err2)
}

// stored is Set's error from its tiers' (wrapped): stored means some tier
// holds it, so a refusal by one tier is not an error when the other took
// it.
func (t *Tiered) stored(err1, err2 error) error {
	if err1 == nil && t.l1 != nil || err2 == nil && t.l2 != nil {
		return nil
	}
	if t.l1 == nil && t.l2 == nil {
		return errNoTier
	}
	return errors.Join(err1, err2)
}

// manySetter is what SetMany uses of L1 when it has it (l1.Store): the
// writes of many keys for the cost of fewer cache misses.
type manySetter interface {
	SetMany(ctx context.Context, keys []string, es []*Entry, errs []error, keep func(*Entry) bool)
}

// ErrStale is SetMany's error for an entry its keep refused: it predates
// an invalidation, and no tier was written.
var ErrStale = errors.New("cache: entry predates an invalidation")

// SetMany is Set for each keys[i] and es[i], in that order per tier, with
// errs[i] (len(errs) >= len(keys)) what Set would have returned: for the
// entries of one bulk answer, which L1 writes together (l1.Store.SetMany).
// keep, if not nil, is asked for each entry right before L1 writes it,
// under the lock L1's tag invalidation takes (before the L2 write when
// there is no L1): an entry it refuses is written to no tier (ErrStale).
func (t *Tiered) SetMany(ctx context.Context, keys []string, es []*Entry, errs []error, keep func(*Entry) bool) {
	errs = errs[:len(keys)]
	clear(errs)
	switch ms, ok := t.l1.(manySetter); {
	case ok:
		ms.SetMany(ctx, keys, es, errs, keep)
	case t.l1 != nil:
		SetEach(ctx, t.l1, keys, es, errs, keep)
	}
	for i, key := range keys {
		if errors.Is(errs[i], ErrStale) || t.l1 == nil && keep != nil && !keep(es[i]) {
			errs[i] = ErrStale
			continue
		}
		var err1, err2 error
		if errs[i] != nil {
			err1 = fmt.Errorf("cache: l1 set: %w", errs[i])
		}
		if t.l2 != nil {
			if err := t.l2.Set(ctx, key, es[i]); err != nil {
				err2 = fmt.Errorf("cache: l2 set: %w", err)
			}
		}
		errs[i] = t.stored(err1, err2)
	}
}

// SetEach is SetMany made of one Set of s per entry, for a store without
// it (an L1 of another kind; a cache wrapped for tracing or a test): errs[i]
// is Set's error for keys[i], or ErrStale when keep, if not nil, refused
// es[i] right before its Set.
func SetEach(ctx context.Context, s interface {
	Set(ctx context.Context, key string, e *Entry) error
}, keys []string, es []*Entry, errs []error, keep func(*Entry) bool) {
	for i, key := range keys {
		if keep != nil && !keep(es[i]) {
			errs[i] = ErrStale
			continue
		}
		errs[i] = s.Set(ctx, key, es[i])
	}
}

// Delete drops keys from both tiers; a failing tier does not stop the
// other, and the errors are joined.
func (t *Tiered) Delete(ctx context.Context, keys ...string) error {
	var err1, err2 error
	if t.l1 != nil {
		if err := t.l1.Delete(ctx, keys...); err != nil {
			err1 = fmt.Errorf("cache: l1 delete: %w", err)
		}
	}
	if t.l2 != nil {
		if err := t.l2.Delete(ctx, keys...); err != nil {
			err2 = fmt.Errorf("cache: l2 delete: %w", err)
		}
	}
	return errors.Join(err1, err2)
}
