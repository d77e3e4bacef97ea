package batch

import (
	"context"
	"crypto/sha256"
	"time"
)

// maxGroupKey is the longest group kept as its own map key. A longer one
// is keyed by its SHA-256, so the keys of MaxGroups groups hold at most
// MaxGroups·maxGroupKey bytes whatever the clients send; the usual group
// (a host and a credential) is shorter and costs no hash on each Load.
const maxGroupKey = 256

// groupKey names a group: the group itself, or its SHA-256 when longer
// than maxGroupKey (hashed, so a group that happens to be 32 bytes long
// never meets a hash).
type groupKey struct {
	s      string
	hashed bool
}

func keyOf(group string) groupKey {
	if len(group) <= maxGroupKey {
		return groupKey{s: group}
	}
	sum := sha256.Sum256([]byte(group))
	return groupKey{s: string(sum[:]), hashed: true}
}

// groupSet is the registered groups of a Loader, plain keys and hashed
// ones each in a map of its own keyed by the key's string alone: every
// Load looks its group up, and a map keyed by groupKey hashed the struct
// through the generic path, two to three times the string fast path's
// time (20-40 against 8-15 ns for a 60-byte group on an AMD EPYC; a
// tenth of BenchmarkLoadJoin's). Guarded by Loader.mu.
type groupSet[G any] struct {
	plain, hashed map[string]G
}

func newGroupSet[G any]() groupSet[G] {
	return groupSet[G]{plain: make(map[string]G), hashed: make(map[string]G)}
}

func (s *groupSet[G]) of(k groupKey) map[string]G {
	if k.hashed {
		return s.hashed
	}
	return s.plain
}

func (s *groupSet[G]) get(k groupKey) G    { return s.of(k)[k.s] }
func (s *groupSet[G]) put(k groupKey, g G) { s.of(k)[k.s] = g }
func (s *groupSet[G]) del(k groupKey)      { delete(s.of(k), k.s) }
func (s *groupSet[G]) len() int            { return len(s.plain) + len(s.hashed) }

// group is the state of one group. Guarded by Loader.mu.
type group[A, V any] struct {
	key     groupKey
	open    *batch[A, V]          // accepting ids; at most one
	ready   []*batch[A, V]        // closed to ids, waiting for a slot, oldest first
	pending map[string]*result[V] // ids of open and ready batches
	// inFlight counts its calls in flight; queued the ids of its open and
	// ready batches (Options.MaxQueued). 32 bits each, side by side: a
	// group is allocated per busy period, and 8 bytes more took it to
	// the next size class.
	inFlight, queued int32
	// listed counts the ids of queued that are lists': admitted by a
	// list's Enlist, or held by a list's isolation retry (batch.listed),
	// against their share of MaxQueued (listShare); retried those of
	// them held by retries (over).
	listed, retried int32
	// last is the size of the group's last batch closed to ids (or, in
	// a group made from the loader's spare, of the spare's): the next
	// batch's room for ids, so that a batch of n ids costs its ids and
	// results one allocation each, not log₂ n. It is never over MaxSize.
	last int
	// timer ends the MaxWait of the group's open batch (timeUp): one
	// timer per group, Reset for each batch it opens, not one per batch,
	// and only while nothing is in flight (windowLocked). nil in a group
	// never registered (lone, quarantined) or never without a call in
	// flight when it opened a batch.
	timer *time.Timer
	armed bool // timer is set for the open batch (armLocked)
	// jumped: the last batch dispatched went ahead of the queue's first
	// (jumpLocked); the next goes in turn, so a list still progresses.
	jumped bool
	// waiting: g is in the loader's line for a slot (Loader.waiting).
	waiting bool
}

// batch is one fetch to make. Its fields are guarded by Loader.mu until it
// is dispatched, and read only by its run after.
type batch[A, V any] struct {
	g   *group[A, V]
	arg A
	ctx context.Context
	ids []string
	res []*result[V] // res[i] is the outcome of ids[i]
	// opened is when the batch opened (its MaxWait's start), and when
	// its Options.Deadline starts; zero for lone batches, which go at
	// once, and for isolation retries unless a Deadline is set (their
	// queueing then: queueRetriesLocked).
	opened  time.Time
	expired bool // MaxWait is up
	// solo: a one-id request's id is in it (joinLocked; a retry of
	// such an id), which may go ahead of the queue (jumpLocked).
	solo bool
	// listed counts its ids a list's Enlist admitted, or all of them in
	// a list's isolation retry (group.listed, queueRetriesLocked).
	listed int32
	// retry: an isolation call, of owner's ids only (nil: one-id requests').
	retry bool
	owner *Requester
	round *round
	alone bool // a quarantined id's call of its own
}

// result is the outcome of one id of a batch, shared by all its waiters.
// v, found and err are written once, before settled is set, and only read
// after (by a LoadAs waiter once done is closed, by the goroutine that
// tells the LoadThen waiters); the other fields are guarded by Loader.mu.
// A settled result is never in a group's pending, so no waiter joins it
// after.
//
// After a shared call failed, the id may ride in several calls at once,
// one per list request waiting on it (see partitionLocked): the first
// call that answers it settles it for every waiter, and it fails only
// when the last call holding it failed.
type result[V any] struct {
	// done is made for the first LoadAs waiter and closed when settled:
	// a request that LoadThen finishes costs no channel.
	done chan struct{}
	// then and thens are the LoadThen waiters' (then the first one's).
	then  Waiter[V]
	thens []Waiter[V]
	v     V
	err   error
	reqs  []*Requester // the list requests waiting on it
	held  int          // calls holding it, queued or in flight
	// The flags sit together: a Slot in a caller's allocation holds a
	// result, and each 8 bytes may take that to a larger size class.
	found bool
	solo  bool // a one-id client request waits on it
	// settled: v, found and err are final, done (if any) is closed.
	settled bool
	told    bool // its LoadThen waiters are being told (tellLocked)
	// waiting counts the waiters that may leave: LoadAs waiters and
	// Enlist's list requests, until their ctx ends (leave). With none
	// and no LoadThen waiter (which never leaves), it is abandoned.
	waiting int32
}

// abandoned reports whether nobody waits on r any more: a batch of such
// results is dropped unsent (dropAbandonedLocked). Loader.mu must be held.
func (r *result[V]) abandoned() bool { return !r.settled && r.waiting <= 0 && r.then == nil }

// round is one isolation round of an ErrSuspect failure: the calls of each
// client request's ids apart. If none is answered, the upstream is down.
type round struct {
	pending  int
	answered bool
	failed   []string // its one-id calls that failed
}
