package l2

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The sweep's rounds (PurgeAll). A round (one SCAN page, or one pipeline
// of UNLINKs) that fails is retried on the same cursor or keys with half
// the page, after a wait that starts at Timeout and doubles up to
// maxRoundWait; maxRoundFailures failures of one round in a row stop the
// sweep (Redis is down, not slow). A round that succeeds doubles the page
// again, up to sweepPage.
const (
	sweepPage        = 1000
	minSweepPage     = 16
	maxRoundFailures = 10
	maxRoundWait     = time.Second
)

// PurgeReport is what PurgeAll's sweep did.
type PurgeReport struct {
	Unlinked int   // keys removed
	Retried  int   // rounds retried after a failure
	Complete bool  // the sweep went over every key of sweptKinds
	SweepErr error // why it stopped short, when not Complete
}

// PurgeAll drops every entry: it invalidates them all at once, then
// removes sidecache's entry and lease keys (sweptKinds) to free the
// memory. It never matches on the prefix alone: Prefix may be empty
// (docs/configuration.md), and the database is then shared with keys
// sidecache did not write, which a purge must leave alone.
//
// The invalidation is what makes the purge hold, and is one pipeline:
// the epoch (epoch.go) of each of every is raised to now, and the other
// replicas are told to empty their L1 and refuse fills begun before now.
// every must be tags every entry carries (the proxy passes its routes'
// implicit tags). An entry fetched before now then reads as a miss on
// every replica whether the sweep reaches it or not, and so does one a
// peer's fill stores after the sweep went past.
//
// The sweep keeps Redis's note of the instance its epochs were written on
// (P run, restart.go): swept, a read replica promoted afterwards would
// hold none, and a process started on it would take the floor of that
// instance's start, before the failover, instead of the failover's.
//
// The sweep keeps every epoch key (P v:<tag>), not only every's: a write
// during the sweep raises a tag's epoch, and a swept epoch key would be
// recreated at 0 by the next store of that tag, making the entries the
// write refused readable again. Epoch keys expire on their own, and their
// TTL covers the entries stored before (every store stretches its tags'
// epoch keys over the entry).
// PurgeAll's error is the invalidation's, or, when every is empty (the
// sweep is then all there is), an incomplete sweep's.
//
// The sweep (SCAN + UNLINK on every master) runs within ctx, each round
// within Timeout. A slow round (a large keyspace under load) is retried
// with a smaller page rather than failing the purge; a sweep that cannot
// finish says so in the report (SweepErr) with what it removed. Its
// failures are not counted against the breaker: they are the sweep's own
// load, not the traffic's.
func (s *Store) PurgeAll(ctx context.Context, every ...string) (PurgeReport, error) {
	if err := s.admit(); err != nil {
		return PurgeReport{}, wrap("purge", err)
	}
	s.flushQueued(ctx)
	if err := s.invalidateAll(ctx, every); err != nil {
		return PurgeReport{}, wrap("purge", err)
	}
	rep := s.sweep(ctx)
	if !rep.Complete && len(every) == 0 {
		return rep, wrap("purge", rep.SweepErr)
	}
	return rep, nil
}

// invalidateAll raises the epochs of tags and publishes the "all"
// message in one pipeline, retried as a sweep round is (both are
// idempotent).
func (s *Store) invalidateAll(ctx context.Context, tags []string) error {
	msg, err := s.message(Invalidation{All: true})
	if err != nil {
		return err
	}
	now := strconv.FormatInt(s.epochNow().UnixMilli(), 10)
	var r rounds
	return r.run(ctx, s.opts.Timeout, func(cctx context.Context) error {
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(tags))
		for i, t := range tags {
			cmds[i] = s.bump(cctx, pipe, s.epochKey(t), now)
		}
		pub := s.publishIn(cctx, pipe, s.channel(), msg)
		_, err := pipe.Exec(cctx)
		s.done(ctx, err)
		if err == nil {
			err = pub.Err()
		}
		if err != nil && !s.noFlags(cmds) {
			s.epochsRefused(ctx, cmds, time.Time{})
		}
		return err
	})
}

// sweptKinds are the key families a sweep removes, each matched on its
// own (SCAN MATCH P<kind>*): entries and leases (store.go's layout), and
// the tag sets of releases before per-tag epochs, which a fleet upgraded
// in place may still hold. Epoch keys (P v:) and the instance note
// (P run) are kept (PurgeAll); no other key under P is sidecache's.
var sweptKinds = []string{"e:", "l:", "t:"}

// sweep removes the keys of sweptKinds on every master.
func (s *Store) sweep(ctx context.Context) PurgeReport {
	var (
		mu  sync.Mutex
		rep = PurgeReport{Complete: true}
	)
	one := func(ctx context.Context, c redis.UniversalClient) error {
		var r rounds
		n, err := s.sweepOne(ctx, c, &r)
		mu.Lock()
		rep.Unlinked += n
		rep.Retried += r.retried
		mu.Unlock()
		return err
	}
	var err error
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return one(ctx, c)
		})
	} else {
		err = one(ctx, s.rdb)
	}
	if err != nil {
		rep.Complete, rep.SweepErr = false, err
	}
	return rep
}

// sweepOne is sweep on one master; it returns the number of keys removed.
func (s *Store) sweepOne(ctx context.Context, c redis.UniversalClient, r *rounds) (int, error) {
	removed := 0
	for _, kind := range sweptKinds {
		n, err := s.sweepKind(ctx, c, r, globEscape(s.key(kind, ""))+"*")
		removed += n
		if err != nil {
			return removed, fmt.Errorf("sweep %s: %w", kind, err)
		}
	}
	return removed, nil
}

// sweepKind removes the keys matching match on one master; it returns
// the number removed.
func (s *Store) sweepKind(ctx context.Context, c redis.UniversalClient, r *rounds, match string) (int, error) {
	var (
		cursor  uint64
		removed int
	)
	page := sweepPage
	for {
		var (
			keys []string
			next uint64
		)
		err := r.run(ctx, s.opts.Timeout, func(cctx context.Context) error {
			var err error
			keys, next, err = c.Scan(cctx, cursor, match, int64(page)).Result()
			if err != nil {
				page = max(page/2, minSweepPage)
			}
			return err
		})
		if err != nil {
			return removed, fmt.Errorf("scan after %d keys removed: %w", removed, err)
		}
		for len(keys) > 0 {
			n := min(len(keys), page)
			err := r.run(ctx, s.opts.Timeout, func(cctx context.Context) error {
				n = min(len(keys), page)
				pipe := c.Pipeline()
				for _, k := range keys[:n] {
					pipe.Unlink(cctx, k)
				}
				_, err := pipe.Exec(cctx)
				if err != nil {
					page = max(page/2, minSweepPage)
				}
				return err
			})
			if err != nil {
				return removed, fmt.Errorf("unlink after %d keys removed: %w", removed, err)
			}
			removed += n
			keys = keys[n:]
		}
		page = min(page*2, sweepPage)
		if cursor = next; cursor == 0 {
			return removed, nil
		}
	}
}

// rounds runs a sweep's rounds, retrying one that fails (see
// maxRoundFailures), and counts the retries.
type rounds struct{ retried int }

// run calls f under a deadline of timeout until it succeeds, fails
// maxRoundFailures times in a row, or ctx ends.
func (r *rounds) run(ctx context.Context, timeout time.Duration, f func(context.Context) error) error {
	wait := timeout
	for fails := 0; ; {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := f(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return errors.Join(ctx.Err(), err)
		}
		if fails++; fails >= maxRoundFailures {
			return fmt.Errorf("%d tries in a row failed: %w", fails, err)
		}
		r.retried++
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, maxRoundWait)
	}
}
