// Package batch turns many single-id loads into one bulk fetch: the loads
// that arrive within a short window (or until the batch is full) share one
// upstream call, the way DataLoader batches a tick's worth of requests.
//
// The window adapts to load the way Nagle's algorithm does (RFC 896): while
// a bulk call for a group is in flight, new ids accumulate for the next one
// instead of leaving in a call of their own when MaxWait is up, so a busy
// upstream sees fewer, fuller calls, and an idle one still sees a lone id
// after MaxWait at most.
//
// A failed call need not fail every id in it: a fetch that marks its error
// with ErrIsolate (or ErrSuspect, while the upstream answers) has the ids
// of each client request fetched again apart from the others', and one
// request's ids retried in halves, within a budget per client request, so
// that another client's good ids never fail for a bad id and no request
// costs the upstream more than 2 + 2·⌈log₂ n⌉ calls for its n ids (see
// Load and Requester). An id that failed alone after making a shared call
// fail is quarantined for a while: it is fetched in a call of its own and
// joins no batch.
//
// A group's queue is bounded in ids (Options.MaxQueued: a load past it is
// refused at once) and in time (Options.Deadline: a batch not sent in
// time fails without a call), and a queued batch whose waiters all left
// is dropped unsent, so a slow or hung upstream makes no waiter wait
// behind an unbounded queue, nor holds the memory of clients long gone.
// One client's lists cannot starve one-id loads either: lists may hold
// only ¾ of the queue, the lists' ids past it (their isolation retries
// among them) never count against a one-id load, and a batch of a
// one-id load goes ahead of the queued ones every other call
// (jumpLocked).
package batch

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Defaults for the zero values of Options.
const (
	DefaultMaxInFlight = 2
	DefaultMaxGroups   = 1024
)

// ErrClosed is returned by Load after Close.
var ErrClosed = errors.New("batch: loader closed")

// ErrPanicked is wrapped by the error every waiter of a batch gets when fetch
// panicked; a panic must not take the process down with it, nor strand the
// waiters. A panic is never isolated (see ErrIsolate).
var ErrPanicked = errors.New("batch: fetch panicked")

// ErrIsolate, wrapped by an error a FetchFunc returns, says the failure may
// be caused by some of the ids rather than by the upstream: a 4xx answer to
// the bulk call, or an answer the caller cannot split. The Loader then
// fetches the two halves of the batch separately, recursively, so that the
// ids that do not cause the failure get their values and each id that fails
// on its own gets the error of its own one-id fetch.
//
// Errors that say the upstream is unwell (502, 503, 504, timeout, refused
// connection) must wrap neither it nor ErrSuspect: they fail the whole
// batch at once, with no retry, so a struggling upstream is not sent more
// calls.
var ErrIsolate = errors.New("batch: isolate")

// ErrSuspect, wrapped by an error a FetchFunc returns, says the failure may
// be caused by some of the ids or by the upstream: a 500 (RFC 9110
// §15.6.1, an unexpected condition, which an id the upstream's database
// cannot parse raises as readily as a broken database does). It is
// isolated as ErrIsolate is while the upstream is not judged down. The
// Loader judges it down when a round of isolation calls across client
// requests all failed, and up again at the next answer that is not such a
// failure: a down upstream is sent one round of retries, at most one per
// client request, and then none until it answers again.
var ErrSuspect = errors.New("batch: suspect")

// ErrApart, wrapped by an error a FetchFunc returns, says the call failed
// for the ids together, not for any one of them: its answer was larger
// than the caller keeps of one answer. A shared call is then retried once
// per client request, each holding that request's ids only (as for
// ErrIsolate), so a one-id request still gets its own id's value; one
// request's ids are never halved: an answer too large for them together
// is the request's to handle whole (a list passes through), and halving it
// would only spend calls on an answer the request cannot use.
var ErrApart = errors.New("batch: retry each request apart")

// ErrBudget is wrapped by the error of an id left unfetched because its
// client request spent its calls (see Requester).
var ErrBudget = errors.New("batch: request's upstream call budget spent")

// ErrQueueFull is the error of a load refused because its group holds
// Options.MaxQueued ids not yet sent, or the loader MaxQueuedAll: the
// upstream is not keeping up, and
// a queue that grows without bound only makes every waiter later.
var ErrQueueFull = errors.New("batch: group's queue full")

// ErrDeadline is the error of the ids of a batch not sent within
// Options.Deadline: failed without a call, as the waiters' answer would
// come later than the caller allows.
var ErrDeadline = errors.New("batch: not sent within its deadline")

// ErrAbandoned is the reason given to Options.OnDrop for the ids of a
// batch dropped unsent because every waiter on them left (their ctx
// ended). No waiter gets it.
var ErrAbandoned = errors.New("batch: every waiter left")

// Options bound a batch.
type Options struct {
	// MaxSize is the number of distinct ids at which a batch is closed to
	// new ids and fetched as soon as MaxInFlight allows. Values below 1
	// mean 1.
	MaxSize int
	// MaxWait is how long a batch stays open after its first Load when no
	// call of its group is in flight: the latency a lone request pays for
	// the chance to share a call. While a call is in flight, an open batch
	// goes when it is full or when the group has no call left in flight,
	// or, holding a one-id load's id with MaxWait up, when a call returns
	// with batches queued (jumpLocked).
	MaxWait time.Duration
	// MaxInFlight bounds the bulk calls of one group at once, isolation
	// retries included. Values below 1 mean DefaultMaxInFlight.
	MaxInFlight int
	// MaxGroups bounds the groups that hold state at once (open, queued or
	// in-flight batches). A Load for a new group beyond it is fetched at
	// once in a batch of its own, outside any group: the caller's request
	// still gets its answer, and a client that varies its headers cannot
	// grow the loader's memory. Values below 1 mean DefaultMaxGroups.
	MaxGroups int
	// OnBatch, if set, is told the number of distinct ids of each fetch as
	// it starts (the sidecache_batch_size histogram). Isolation retries
	// count as fetches.
	OnBatch func(size int)
	// OnIsolate, if set, is told the size of each batch whose failure is
	// being isolated, just before its halves are queued.
	OnIsolate func(size int)
	// OnOverflow, if set, is called for each Load fetched alone because
	// MaxGroups groups exist.
	OnOverflow func()

	// Quarantine is how long an id that made a shared call fail, and then
	// failed alone, is fetched in a call of its own rather than joining a
	// batch. 0 disables the quarantine.
	Quarantine time.Duration
	// MaxQuarantined bounds the ids quarantined at once; when full, the
	// oldest is forgotten. Values below 1 mean DefaultMaxQuarantined.
	MaxQuarantined int
	// Refused, if set, reports whether the value a one-id call found is
	// the upstream refusing the id (the proxy: its own 4xx answer), which
	// quarantines the id as an error would.
	Refused func(v any) bool
	// OnQuarantine, if set, is told the number of ids quarantined whenever
	// it changes, and OnEvict each id forgotten to make room.
	OnQuarantine func(n int)
	OnEvict      func()
	// OnBudget, if set, is told the number of ids failed with ErrBudget.
	OnBudget func(ids int)
	// OnPanic, if set, is told once of each fetch that panicked, with the
	// panic's value and stack: the stack is then left out of the error
	// each waiter gets (ErrPanicked), so that it is logged once, not once
	// per waiter.
	OnPanic func(v any, stack []byte)
	// Now is the clock of the quarantine; nil means time.Now.
	Now func() time.Time

	// MaxQueued bounds the ids a group holds in batches not yet sent (its
	// open batch and its queued ones, isolation retries included). A load
	// whose id would take the group past it fails at once with
	// ErrQueueFull, as does an Enlist whose ids would (a list is admitted
	// whole or not at all), or would take the ids lists hold past ¾ of
	// it (listShare: the rest is one-id loads' own); a group with nothing
	// queued admits any one request, whose own ids its caller bounds
	// (split.max_ids). Isolation retries are queued whatever the bound
	// (their ids were admitted), but hold a failed call's ids once each
	// when one retry per list would take the queue past it
	// (classesLocked), so retries exceed the bound by at most the ids
	// of the calls in flight, however many lists shared a call; a
	// list's retries count as the list's ids, so the lists' ids past
	// their share (retries, a list an idle group admitted) never count
	// against a one-id load, and count against a new list in the bound
	// only, not in the share. 0: no bound.
	MaxQueued int
	// Deadline, if set, is how long a batch may wait to be sent, from its
	// opening (an isolation retry: from its queueing); it is read at each
	// check, so a new value applies to the batches queued. One past it fails its ids with ErrDeadline, without a
	// call, when the group's next call returns: a batch waits only behind
	// calls in flight, each bounded by fetch, so no waiter waits longer
	// than Deadline and two calls, however long the queue.
	Deadline func() time.Duration
	// MaxInFlightAll bounds the calls of all groups at once, those of
	// ids fetched alone (MaxGroups, Quarantine) and the calls callers
	// make outside the batches (Own) included. A group is
	// named by what its caller forwards (the proxy: the Host and the
	// keyed headers), which a client chooses: with MaxInFlight alone, a
	// client varying its Host kept MaxGroups·MaxInFlight calls in
	// flight. A group with a batch to send and no slot of the loader's
	// free waits in line, and the groups in line take the slots freed in
	// turn, one call each (grantLocked), so that a group with a long
	// queue delays another's batch by one call per group ahead of it,
	// not by its queue. 0: no bound.
	MaxInFlightAll int
	// MaxQueuedAll bounds the ids of all groups in batches not yet sent,
	// as MaxQueued bounds one group's, lists' share and all: a load or a
	// list that would take the loader past it is refused with
	// ErrQueueFull, whatever its group holds, so that the memory a client
	// can make the loader hold does not grow with the groups it makes,
	// nor can lists across groups take the one-id loads' quarter. A
	// loader with nothing queued admits any one request. 0: no bound.
	MaxQueuedAll int
	// OnDrop, if set, is told of ids that never went upstream, and why:
	// ErrQueueFull (refused), ErrDeadline (failed unsent) or ErrAbandoned
	// (dropped: their waiters left).
	OnDrop func(reason error, ids int)
}

// FetchFunc fetches ids in one call. arg is the one given by the Load that
// opened the batch. Ids absent from the returned map are reported as not
// found. An error fails every id of the call, unless it wraps ErrIsolate and
// the call had more than one id (see ErrIsolate).
type FetchFunc[A, V any] func(ctx context.Context, arg A, ids []string) (map[string]V, error)

// ListFunc is FetchFunc with its values in the order of ids: vals[i] is
// ids[i]'s, and every id of a call that returns no error is found. A
// fetch that answers each id it is asked for (a missing element being an
// answer too) needs no map built, filled and read back per call: one
// hash of each id on each side, and the map's allocation, per bulk call.
type ListFunc[A, V any] func(ctx context.Context, arg A, ids []string) (vals []V, err error)

// Loader collects Loads into batches. It is safe for concurrent use.
type Loader[A, V any] struct {
	opts  Options
	fetch FetchFunc[A, V] // one of fetch and list is set
	list  ListFunc[A, V]

	mu     sync.Mutex
	groups groupSet[*group[A, V]]
	// spare is the last group that went idle (runOne), with its pending
	// map's room, its ready queue's, its timer and its last batch's
	// size, made again into the next new group (newGroupLocked): at a
	// moderate rate a group goes idle between its calls, and each call's
	// group cost a map grown id by id, a timer and slices grown the same
	// way. It holds no more than that group did.
	spare  *group[A, V]
	closed bool
	wg     sync.WaitGroup // batches not yet answered
	q      *quarantine
	// inFlight and queued are the calls in flight and the ids queued of
	// all groups (Options.MaxInFlightAll, MaxQueuedAll), own calls
	// (Own) among the calls, listed and retried the lists' ids of
	// queued and those of them in isolation retries (as group's);
	// waiting is the line of groups with a batch to send and own calls
	// with no slot (grantLocked).
	inFlight, queued, listed, retried int
	waiting                           []inLine[A, V]
	// down: the last round of ErrSuspect isolation failed throughout,
	// and no call has been answered since; ErrSuspect is not isolated.
	down bool
}

// New returns a Loader that fetches with fetch.
func New[A, V any](opts Options, fetch FetchFunc[A, V]) *Loader[A, V] {
	l := newLoader[A, V](opts)
	l.fetch = fetch
	return l
}

// NewList returns a Loader that fetches with list.
func NewList[A, V any](opts Options, list ListFunc[A, V]) *Loader[A, V] {
	l := newLoader[A, V](opts)
	l.list = list
	return l
}

func newLoader[A, V any](opts Options) *Loader[A, V] {
	opts.MaxSize = max(opts.MaxSize, 1)
	if opts.MaxInFlight < 1 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.MaxGroups < 1 {
		opts.MaxGroups = DefaultMaxGroups
	}
	if opts.MaxQuarantined < 1 {
		opts.MaxQuarantined = DefaultMaxQuarantined
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Loader[A, V]{opts: opts, groups: newGroupSet[*group[A, V]](),
		q: newQuarantine(opts.Quarantine, opts.MaxQuarantined)}
}

// Queued is the ids the loader holds unsent across its groups (open and
// queued batches: what MaxQueuedAll bounds), so that a caller, a test
// above all, can see a request enlisted without timing it.
func (l *Loader[A, V]) Queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.queued
}

// Close fetches the open and queued batches now (still at most MaxInFlight
// per group and MaxInFlightAll in all at once), waits for every fetch to return, and makes later
// Loads fail with ErrClosed. It is for shutdown: waiters already queued
// still get their answers.
func (l *Loader[A, V]) Close() {
	l.mu.Lock()
	l.closed = true
	for _, m := range []map[string]*group[A, V]{l.groups.plain, l.groups.hashed} {
		for _, g := range m {
			l.pumpLocked(g)
		}
	}
	l.mu.Unlock()
	l.wg.Wait()
}
