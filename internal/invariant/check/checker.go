// Package check holds the invariant harness's answers to the invariants:
// every client's answer (Answer, Trailers), a 304's kept copy held as if
// it were the answer, and the writes each read is ordered against. It
// collects what it found (Violations) and what each check applied to
// (Checked), so a run shows its checks were live. It knows nothing of
// rounds or budgets, which the runner checks.
package check

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// Violation is one broken invariant, with the request that showed it.
type Violation struct {
	Kind string // identity, coding, resource, query, own-write, max-lag, budget, budget-request, resend, garbled, bound
	Msg  string
}

func (v Violation) String() string { return v.Kind + ": " + v.Msg }

// Config is what the checks need to know of the replicas' config.
type Config struct {
	Host string // Host header of every request
	// MaxLag is the replicas' coherence.max_lag; LagMargin is added to it
	// before a peer's stale read counts (see invariant.Config).
	MaxLag, LagMargin time.Duration
	// NoHeld turns off the stale-if-error check of route s (stale.go):
	// the runner's withheld.
	NoHeld bool
	// HeldLocal: a copy is held only on the replica whose client received
	// it (its L1), not in L2 for every replica: the evict-epochs row,
	// whose Redis has evicted, so an element's first fill under a tag
	// whose epoch key is new is stored in L2 but reads as a miss there
	// (internal/cache/l2's touchScript, docs/coherence.md).
	HeldLocal bool
	// UpstreamTimeout is the replicas' upstream.timeout (crowdTimeout).
	UpstreamTimeout time.Duration
	// MaxBodyBytes is the replicas' cache.max_body_bytes: a list the
	// sidecar reassembled (Cache-Status detail "split …") is one answer
	// it buffered, never larger (list-bound).
	MaxBodyBytes int
}

// Checker checks one run's answers; its methods are safe for concurrent
// use by the run's requests.
type Checker struct {
	cfg Config
	// remember puts a checked 200 with a validator into the clients'
	// pool (traffic.Gen.Remember), for later conditionals.
	remember func(q *traffic.Request, resp *http.Response, st *origin.Stamp, list []origin.Stamp)

	mu         sync.Mutex
	acks       map[string][]ack
	checked    map[string]int
	violations []Violation
	// held: route s's resources whose shareable copy a client without
	// Accept-Language received, and when first (stale.go).
	held map[string]time.Time
	// dropping counts the drops of every stored copy under way (a purge
	// of everything, a Redis restart), and dropped is when the last one
	// ended (drop.go): no copy is held across them.
	dropping int
	dropped  time.Time
	// outage: a Redis restart is under way (drop.go, StartOutage), and
	// the writes acknowledged meanwhile wait in deferred for the time
	// their invalidations are sure to be published (EndOutage).
	outage   bool
	deferred []deferredAck
	// stall: the outage is a Redis stall (StartStall), whose writes are
	// held at once on their own replica.
	stall bool
}

// deferredAck is a write acknowledged during a Redis outage, held to
// nothing until EndOutage.
type deferredAck struct {
	res string
	a   ack
}

type ack struct {
	path    string
	ver     int
	at      time.Time
	replica int
	// ownOnly: held on its own replica only (own-write), not to max-lag:
	// a write acknowledged during a Redis stall (StartStall).
	ownOnly bool
}

// Acknowledge holds later reads of res to version ver from at on, as a
// write acknowledged through replica (an index no read uses holds them to
// max-lag only): a write cut short, that the origin applied, and that
// the client was told failed (a trickled write's 408) must invalidate
// as one acknowledged.
func (ch *Checker) Acknowledge(res, path string, ver int, at time.Time, replica int) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.ackLocked(res, ack{path: path, ver: ver, at: at, replica: replica})
}

// Hold is Acknowledge even during an outage: the redis-stall row holds its
// own write, answered while Redis is paused, to max-lag from its answer on
// (README, "When things fail": a paused Redis lets no version older than a
// write acknowledged max_lag earlier through).
func (ch *Checker) Hold(res, path string, ver int, at time.Time, replica int) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.acks[res] = append(ch.acks[res], ack{path: path, ver: ver, at: at, replica: replica})
}

// ackLocked records a (ch.mu held), or defers it during an outage
// (StartOutage).
func (ch *Checker) ackLocked(res string, a ack) {
	if ch.outage {
		ch.deferred = append(ch.deferred, deferredAck{res: res, a: a})
		if ch.stall && a.replica >= 0 {
			a.ownOnly = true
			ch.acks[res] = append(ch.acks[res], a)
		}
		return
	}
	ch.acks[res] = append(ch.acks[res], a)
}

// New is the checker of a run whose clients draw from gen.
func New(cfg Config, gen *traffic.Gen) *Checker {
	return &Checker{cfg: cfg, remember: gen.Remember, acks: map[string][]ack{}, checked: map[string]int{}}
}

// Violate records a broken invariant.
func (ch *Checker) Violate(kind, format string, a ...any) {
	ch.mu.Lock()
	ch.violations = append(ch.violations, Violation{Kind: kind, Msg: fmt.Sprintf(format, a...)})
	ch.mu.Unlock()
}

// Count adds n to what check key applied to.
func (ch *Checker) Count(key string, n int) {
	ch.mu.Lock()
	ch.checked[key] += n
	ch.mu.Unlock()
}

// Result is what the checks applied to and found, once the run is over.
func (ch *Checker) Result() (checked map[string]int, violations []Violation) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.checked, ch.violations
}
