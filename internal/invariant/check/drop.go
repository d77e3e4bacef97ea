package check

import "time"

// Drops of stored copies the run makes itself, and writes a Redis
// restart may undo.
//
// A purge of everything (the purge-all row), a Redis restart (the
// redis-restart row) and a reload that retires routes (the reload-torn
// and reload-shadow rows: a regained invalidate rule retires every
// cacheable route while cache.tag_headers is on) drop copies route s's
// stale-if-error check
// (stale.go) counts as held: after them a failure may be a 502 with no
// copy to serve. So no copy is held across one: StartDrop forgets every
// copy noted, nothing is noted while a drop is under way, and a copy
// noted by a request sent before the last drop ended does not count
// either (it may have been served from what was dropped).

// StartDrop is called before a drop of every stored copy begins.
func (ch *Checker) StartDrop() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.dropping++
	clear(ch.held)
}

// EndDrop is called once the drop StartDrop began is over, at end.
func (ch *Checker) EndDrop(end time.Time) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.dropping--
	if end.After(ch.dropped) {
		ch.dropped = end
	}
	clear(ch.held)
}

// Demote holds the writes acknowledged since from to max-lag only, as if
// acknowledged through no replica: Redis restarted from a snapshot taken
// at from, so their epoch raises are lost, and docs/coherence.md ("When
// Redis loses epochs") promises only that a read sent more than max_lag
// after such a write never returns the version it replaced (the floor
// refuses every entry fetched before the restart once older than
// max_lag), not that the writer's own replica never does. It returns how
// many it demoted.
func (ch *Checker) Demote(from time.Time) int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	n := 0
	for res, as := range ch.acks {
		for i := range as {
			if !as[i].at.Before(from) && as[i].replica >= 0 {
				as[i].replica = -1
				n++
			}
		}
		ch.acks[res] = as
	}
	return n
}

// StartOutage is called as Redis goes down for a restart in the middle
// of a round's traffic (the redis-restart row). With demote (a restart
// from a snapshot taken at from) it demotes the writes acknowledged
// since from, as Demote does, in the same step: no acknowledgement
// slips between the two. Until EndOutage, a write acknowledged is held
// to nothing yet: its invalidation may have failed with Redis, and the
// sidecar then answers it once coherence.write_hold has passed, its
// bound max_lag counted from the replay's publish (docs/configuration.md,
// "The guarantee, exactly"), not from its answer. It returns how many it
// demoted.
func (ch *Checker) StartOutage(demote bool, from time.Time) int {
	ch.mu.Lock()
	ch.outage = true
	ch.mu.Unlock()
	if !demote {
		return 0
	}
	return ch.Demote(from)
}

// StartStall is called as Redis stalls (CLIENT PAUSE, or the process
// stopped) in the middle of a round's traffic: the redis-stall row. Until
// EndOutage a write acknowledged is held at once on its own replica
// (own-write: the writer drops its tags in its own L1 and keeps their
// tombstones before it answers, whatever Redis does; README, "Coherence
// after writes"), and on the others from EndOutage on, to max-lag: its
// invalidation may have gone out past coherence.write_hold, with its
// bound counted from the replay's publish (docs/configuration.md, "The
// guarantee, exactly"). Nothing a stall drops.
func (ch *Checker) StartStall() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.outage, ch.stall = true, true
}

// EndOutage is called once every replica has published its replayed
// invalidations (sidecache_invalidation_replay_pending back at 0) after
// the outage StartOutage (or StartStall) began, at at: the writes
// acknowledged during it are held from at on, to max-lag only (as if
// acknowledged through no replica: after a restart the writer's own
// replica is promised no more than the others; after a stall it held
// them already). It returns how many it held.
func (ch *Checker) EndOutage(at time.Time) int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.outage, ch.stall = false, false
	n := len(ch.deferred)
	for _, d := range ch.deferred {
		d.a.at, d.a.replica = at, -1
		ch.acks[d.res] = append(ch.acks[d.res], d.a)
	}
	ch.deferred = nil
	return n
}
