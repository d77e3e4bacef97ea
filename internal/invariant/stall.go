package invariant

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// The redis-stall row (PCG stream 44): once a seed, in the middle of an
// ordinary round's traffic (mid.go: the first requests at once, the
// stall once some of their answers came, the rest during it), the
// replicas' Redis stalls without going down: CLIENT PAUSE
// ALL (every command of every client postponed, the connections kept),
// or its process stopped (SIGSTOP, as a frozen VM: nothing read or
// answered, connections still accepted by the kernel) and continued;
// for stallShort or stallLong (drawn).
// What the sidecar promises for it (README, "When things fail"; docs/
// configuration.md, cache.l2 and "The guarantee, exactly"):
//
//   - answers come from L1 and the upstream, at most l2.redis.timeout
//     later in all (one Redis budget per request, internal/redisbudget),
//     a write's at most coherence.write_hold (max_lag) later still. The
//     row's own requests, sent once the stall has begun through one
//     replica (a read L1 holds, a read no one made, a one-id read of
//     batch route u, a write of a resource both replicas hold), must be
//     answered before Redis answers again (redis-stall). The round's own requests
//     are checked as any other, not against a time: the origin's slow,
//     stalled and deaf answers take longer whatever Redis does.
//   - no write lost. A write acknowledged during the stall holds later
//     reads through its own replica at once (the writer drops its tags
//     in its L1 and keeps their tombstones before answering), and reads
//     through the others max_lag after its replayed invalidation was
//     published (check's StartStall, EndOutage). The row's write is held
//     as the README's "Redis paused" row says, to max-lag from its
//     answer (check's Hold): once max_lag (plus margin) has passed since,
//     and the stall still holds, the other replica reads it, which must
//     refuse its copy (older than max_lag, its proof stalled with its
//     heartbeats); and its replica reads it once Redis answers again
//     (own-write: L2 still holds the copy under the epoch the stalled
//     raise could not move, which the writer's tombstone refuses).
//   - readiness recovers: once Redis answers, every replica's /readyz
//     says l2 up and coherence proven, and its replayed invalidations
//     are published, within recoverWithin (redis-recover).
//
// The stall falls in the first ordinary round from a round drawn between
// 1/8 and 3/8 of the run (runs of 40 rounds or more), before the
// redis-restart row's first restart and the redis-oom row's stretch.

// How long Redis stalls. stallShort is twice a write's bound
// (coherence.write_hold, 1 s, plus the request's Redis budget, 250 ms)
// and less than upstream.timeout (3 s), which bounds a write's
// invalidation as a whole: a write held past its hold, or a read that
// waited on Redis rather than on its budget, is still unanswered when
// Redis answers again. stallLong leaves the other replica the time to
// read the write, max_lag (plus margin) after its answer, while the
// stall holds.
const (
	stallShort = 2500 * time.Millisecond
	stallLong  = 4 * time.Second
)

// The row's resources, read by no round (rounds read r ids 1-4, u ids
// 1-64): stallHit is read through every replica before the round (an L1
// hit, or a refetch once the replica's proof is older than max_lag),
// stallMiss by nothing before (a miss), stallWrite through every replica
// before and written during the stall; stallBatch is route u's id.
const (
	stallHit   = "/r/91"
	stallMiss  = "/r/92"
	stallWrite = "/r/93"
	stallBatch = "/u/47001"
)

// stallRow is the row's state in a run.
type stallRow struct {
	rng  *rand.Rand
	at   int // the round from which it plays (-1: never)
	done bool
}

// stallDraw is a stall a round plays among its requests.
type stallDraw struct {
	*midSplit
	freeze bool          // SIGSTOP, not CLIENT PAUSE
	length time.Duration // stallShort or stallLong
	k      int           // the probes' replica; the peer is the next one
	// bounded are the probes sent as the stall begins, which must be
	// answered before Redis answers again; write is the row's write,
	// peer and own its reads after it (through the peer during the
	// stall, through its replica once Redis answers), sent once
	// peerGo and ownGo are closed.
	bounded       []*traffic.Request
	write         *traffic.Request
	peer, own     *traffic.Request
	peerGo, ownGo chan struct{}
	wrote         chan struct{} // closed once write is answered
	probes        map[*traffic.Request]bool
	mu            sync.Mutex
	ends          map[*traffic.Request]time.Time // when each probe was answered
}

// drawStallRound draws the round from which the row plays, from stream
// 44 alone, so the other rows' draws are unchanged.
func (r *run) drawStallRound() {
	r.stall.rng, r.stall.at = rand.New(rand.NewPCG(r.cfg.Seed, 44)), -1
	if r.cfg.Mix.Has("redis-stall") && r.cfg.StallRedis != nil && r.cfg.Rounds >= 40 {
		n := r.cfg.Rounds
		r.stall.at = n/8 + r.stall.rng.IntN(n/4)
	}
}

// drawStall returns the stall due in this round and where among reqs it
// falls, with the row's probes appended to reqs (held for the stall), or
// nil. Before it, stallHit and stallWrite are read through every replica
// (checked as any read), and each must hold stallWrite (admin GET
// /cache), so the peer's read during the stall has a copy to refuse.
func (r *run) drawStall(ctx context.Context, round int, reqs *[]*traffic.Request) *stallDraw {
	if r.stall.at < 0 || r.stall.done || round < r.stall.at || r.oom.on || len(r.cfg.Replicas) < 2 {
		return nil
	}
	r.stall.done = true
	rng := r.stall.rng
	d := &stallDraw{freeze: rng.IntN(2) == 1, k: rng.IntN(len(r.cfg.Replicas)), probes: map[*traffic.Request]bool{}, ends: map[*traffic.Request]time.Time{}}
	d.midSplit = newMidSplit(rng, *reqs)
	d.length = stallShort
	if rng.IntN(2) == 0 {
		d.length = stallLong
	}
	r.chk.Count("redis-stall-held", len(*reqs)-d.first)
	for i := range r.cfg.Replicas {
		r.read(ctx, i, stallHit, "redis-stall", "redis-stall-warm-")
		if r.fillStored(ctx, i, stallWrite, "redis-stall", "redis-stall-warm-") {
			r.chk.Count("redis-stall-warm-stored", 1)
		}
	}
	p := (d.k + 1) % len(r.cfg.Replicas)
	probe := func(i int, method, path string, after chan struct{}) *traffic.Request {
		q := r.gen.Probe(i, method, path, origin.Resource(path), i)
		q.After, d.probes[q] = after, true
		*reqs = append(*reqs, q)
		return q
	}
	batch := probe(d.k, http.MethodGet, stallBatch, d.down)
	batch.Route = "u"
	d.write = probe(d.k, http.MethodPatch, stallWrite, d.down)
	d.bounded = []*traffic.Request{probe(d.k, http.MethodGet, stallHit, d.down), probe(d.k, http.MethodGet, stallMiss, d.down), batch, d.write}
	d.peerGo, d.ownGo, d.wrote = make(chan struct{}), make(chan struct{}), make(chan struct{})
	d.peer = probe(p, http.MethodGet, stallWrite, d.peerGo)
	d.own = probe(d.k, http.MethodGet, stallWrite, d.ownGo)
	return d
}

// answered records when a probe was answered; the round's own requests
// are the split's (mid.go).
func (d *stallDraw) answered(q *traffic.Request) {
	if d.probes[q] {
		d.mu.Lock()
		d.ends[q] = check.Now()
		d.mu.Unlock()
		if q == d.write {
			close(d.wrote)
		}
		return
	}
	d.midSplit.answered(q)
}

func (d *stallDraw) play(ctx context.Context, r *run) { r.stallIn(ctx, d) }

// stallIn plays d on the round's goroutine: once d.before answers came,
// Redis stalls, the held requests and the probes go, the peer reads the
// write once max_lag (plus margin) has passed since its answer if the
// stall still holds then, and once Redis answers again the probes'
// answers are checked against that moment, the writer reads its write,
// and every replica must serve from Redis again and publish what it
// replays: only then are the writes acknowledged during the stall held on
// the other replicas (check.EndOutage).
func (r *run) stallIn(ctx context.Context, d *stallDraw) {
	defer d.goDown()
	defer func() {
		// Whatever happened, the reads go (a round waits for every
		// request it drew).
		select {
		case <-d.peerGo:
		default:
			close(d.peerGo)
		}
		select {
		case <-d.ownGo:
		default:
			close(d.ownGo)
		}
	}()
	if !d.awaitBefore(ctx) {
		return
	}
	name := "pause"
	if d.freeze {
		name = "freeze"
	}
	r.chk.StartStall()
	began := check.Now()
	back, err := r.cfg.StallRedis(ctx, d.freeze, d.length)
	if err != nil {
		r.chk.EndOutage(check.Now())
		r.violate("harness", "redis stall (%s): %v", name, err)
		return
	}
	r.chk.Count(fmt.Sprintf("redis-stall-%s-%v", name, d.length), 1)
	d.goDown()
	var backAt time.Time
	select {
	case <-d.wrote:
		r.holdStallWrite(ctx, d, began, back, &backAt)
	case backAt = <-back:
	case <-ctx.Done():
		return
	}
	if backAt.IsZero() {
		select {
		case backAt = <-back:
		case <-ctx.Done():
			return
		}
	}
	close(d.ownGo)
	d.awaitHeld(r, downFor, "redis-stall-during")
	<-d.wrote // the write's answer is the round's: it came, or the client gave up
	d.mu.Lock()
	for _, q := range d.bounded {
		end, ok := d.ends[q]
		switch {
		case !ok:
		case end.After(backAt):
			r.violate("redis-stall", "%s: sent through replica %d once Redis had stalled (%s for %v), answered %v after the stall began, only after Redis answered again: a request's Redis cost is bounded by l2.redis.timeout, a write's hold by coherence.write_hold", q, q.Replica, name, d.length, end.Sub(began).Round(time.Millisecond))
		default:
			r.chk.Count("redis-stall-bounded", 1)
		}
	}
	d.mu.Unlock()
	for i, a := range r.cfg.Admins {
		r.proven(ctx, i, a)
	}
	r.replayedAll(ctx)
	r.chk.Count("redis-stall-deferred", r.chk.EndOutage(check.Now()))
}

// holdStallWrite runs once the row's write was answered during the
// stall: a 200 is held to max-lag from its answer (check.Hold), and once
// that has passed, if the stall holds for another half second at least,
// the peer reads the resource (its answer checked as any other: held to
// the write). Else the peer reads it once Redis answered (then held to
// what its replica's replay published: nothing more than any read). It
// sets *backAt when Redis answered meanwhile.
func (r *run) holdStallWrite(ctx context.Context, d *stallDraw, began time.Time, back <-chan time.Time, backAt *time.Time) {
	d.mu.Lock()
	end := d.ends[d.write]
	d.mu.Unlock()
	due := end.Add(r.cfg.MaxLag + r.cfg.LagMargin + 100*time.Millisecond)
	if d.write.Got != http.StatusOK || due.After(began.Add(d.length-500*time.Millisecond)) {
		r.chk.Count("redis-stall-peer-late", 1)
		return
	}
	select {
	case <-time.After(time.Until(due)):
		// Held from its answer only now, the peer's read the first
		// read of it through another replica: one sent once Redis
		// answered again is promised max_lag from the replay's publish.
		res := origin.Resource(stallWrite)
		r.chk.Hold(res, stallWrite, r.cfg.Origin.Version(res), end, d.k)
		r.chk.Count("redis-stall-peer-read", 1)
		close(d.peerGo)
	case *backAt = <-back: // Redis answered early: the peer reads later
		r.chk.Count("redis-stall-peer-late", 1)
	case <-ctx.Done():
	}
}

// replayedAll waits until every replica, the trickle replica too, has
// published what it replays (restart.go's replayed).
func (r *run) replayedAll(ctx context.Context) {
	for i, a := range r.cfg.Admins {
		r.replayed(ctx, i, a)
	}
	if r.cfg.TrickleAdmin != "" {
		r.replayed(ctx, len(r.cfg.Admins), r.cfg.TrickleAdmin)
	}
}
