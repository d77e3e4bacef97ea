package check

import "time"

// Drops of stored copies the run makes itself, and writes a Redis
// restart may undo.
//
// A purge of everything (the purge-all row) and a Redis restart (the
// redis-restart row) drop copies route s's stale-if-error check
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
