package invariant

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// A Redis fault played in the middle of a round's traffic (the
// redis-restart row, restart.go; the redis-stall row, stall.go): of the
// round's n requests the first k (drawn from 0 to n) are sent at once,
// and the fault begins once j of their answers came (j from 0 to k): the
// others are in flight across it. The last n-k are sent once it has
// begun (their After).

// midRound is a fault a round plays among its requests: told of each
// answer, and played on the round's own goroutine while they are sent.
type midRound interface {
	answered(q *traffic.Request)
	play(ctx context.Context, r *run)
}

// midSplit is where among a round's requests a fault falls.
type midSplit struct {
	first  int // reqs[:first] go at once
	before int // answers of those before the fault begins
	held   map[*traffic.Request]bool
	// early are reqs[:first]: a request the round adds after the split
	// (drawAgents, drawListWrites) is neither, and its answer is not
	// counted (answers has room for len(reqs) at the split alone: one
	// more send blocked the round's request for good, and the round).
	early   map[*traffic.Request]bool
	answers chan struct{} // one per answer of reqs[:first]
	during  chan struct{} // one per answer of reqs[first:]
	down    chan struct{} // closed once the fault has begun
	once    sync.Once
}

// newMidSplit draws the split of reqs from rng (two draws) and holds
// reqs[first:] until goDown.
func newMidSplit(rng *rand.Rand, reqs []*traffic.Request) *midSplit {
	s := &midSplit{held: map[*traffic.Request]bool{}, early: map[*traffic.Request]bool{}, down: make(chan struct{})}
	s.first = rng.IntN(len(reqs) + 1)
	s.before = rng.IntN(s.first + 1)
	for _, q := range reqs[:s.first] {
		s.early[q] = true
	}
	s.answers, s.during = make(chan struct{}, len(reqs)), make(chan struct{}, len(reqs))
	for _, q := range reqs[s.first:] {
		q.After, s.held[q] = s.down, true
	}
	return s
}

// answered tells s that q's client has its answer (or gave up).
func (s *midSplit) answered(q *traffic.Request) {
	switch {
	case s.held[q]:
		s.during <- struct{}{}
	case s.early[q]:
		s.answers <- struct{}{}
	}
}

// goDown releases the requests held for the fault.
func (s *midSplit) goDown() { s.once.Do(func() { close(s.down) }) }

// awaitBefore waits until before answers came; false when ctx ended.
func (s *midSplit) awaitBefore(ctx context.Context) bool {
	for range s.before {
		select {
		case <-s.answers:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// awaitHeld waits for the answers of the requests held for the fault,
// for at most limit, counting each under count.
func (s *midSplit) awaitHeld(r *run, limit time.Duration, count string) {
	timeout := time.NewTimer(limit)
	defer timeout.Stop()
	for range s.held {
		select {
		case <-s.during:
			r.chk.Count(count, 1)
		case <-timeout.C:
			return
		}
	}
}
