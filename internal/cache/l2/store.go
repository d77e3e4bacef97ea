// Package l2 is the Redis tier of the cache, shared by every replica of a
// service: entries, tag sets for invalidation, a pub/sub channel that tells
// peers to drop their L1 copies, and a lease that turns concurrent misses
// across replicas into one upstream call.
//
// Redis is an accelerator, never a dependency: when it is slow or down the
// store answers with an error at once (a circuit breaker opens after a few
// consecutive failures) and the proxy goes on with L1 and the upstream.
//
// Layout, with P the configured prefix:
//
//	P e:<key>       string   header (request time, tags) + cache.Marshal, PX = lifetime
//	P v:<tag>       string   the tag's epoch: unix ms of its last invalidation (epoch.go)
//	P l:<key>       string   lease token, PX = lease hold, renewed (lease.go)
//	P invalidate    channel  JSON Invalidation messages (and old releases' heartbeats)
//	P beat:<origin> channel  one replica's own heartbeats (heartbeat.go)
package l2

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/sidecache/sidecache/internal/cache/l2/guess"
	"github.com/sidecache/sidecache/internal/cache/l2/late"
	"github.com/sidecache/sidecache/internal/cache/l2/mget"
	"github.com/sidecache/sidecache/internal/cache/l2/proof"
	"github.com/sidecache/sidecache/internal/lograte"
)

// Defaults for the zero values of Options.
const (
	DefaultTimeout          = 100 * time.Millisecond
	DefaultQueueSize        = 4096
	DefaultProbeInterval    = 500 * time.Millisecond
	DefaultFailureThreshold = 3
)

var (
	// ErrDown is returned while the breaker is open: Redis failed several
	// times in a row and is not tried again until a probe succeeds.
	ErrDown = errors.New("l2: redis unavailable")
	// ErrQueueFull is returned by Set when the write queue is full and the
	// entry was dropped.
	ErrQueueFull = errors.New("l2: write queue full")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("l2: closed")
)

// Options configure a Store. Zero values take the defaults above.
type Options struct {
	Addrs      []string
	MasterName string // set: Sentinel (Addrs are the sentinels)
	Cluster    bool   // or len(Addrs) > 1 without MasterName: Redis Cluster
	Username   string
	Password   string
	DB         int

	// Prefix starts every key and the channel, so several services (or
	// versions) can share one Redis.
	Prefix string
	// Timeout bounds every operation, and all the operations one request
	// waits on together (the budget its context carries,
	// internal/redisbudget): a slow Redis never stalls a request longer
	// than this.
	Timeout time.Duration
	Logger  *slog.Logger

	// OnStateChange is called with the initial state from New and then on
	// every transition of the breaker; it drives sidecache_l2_up. It is
	// called in order, never concurrently, and must not block.
	OnStateChange func(up bool)
	// OnInvalidate is called for invalidations published by other
	// replicas, so this replica drops them from its L1. It is also called
	// with All set after the subscription was lost and restored, because
	// messages published meanwhile are gone. Calls come from one
	// goroutine, in order.
	OnInvalidate func(Invalidation)

	// QueueSize bounds the asynchronous write queue (Set, lease release).
	QueueSize int
	// ProbeInterval is how often the store PINGs Redis: to close the
	// breaker when down, and to notice an outage when idle.
	ProbeInterval time.Duration
	// FailureThreshold is how many consecutive failures open the breaker.
	FailureThreshold int
	// LeaseHold is how long a lease outlives its holder's last renewal,
	// and so how long a waiter may wait for a holder that died or lost
	// Redis before it takes over; the holder renews every LeaseHold/3.
	// Default: 4×Timeout, at least 500 ms, so that a renewal that takes
	// up to Timeout still lands in time.
	LeaseHold time.Duration
	// ShardedPubSub (Cluster only): invalidations and heartbeats use
	// SPUBLISH/SSUBSCRIBE on channels in one slot (subscribe.go).
	ShardedPubSub bool
	// SubscribeAddrs (not Cluster): read replicas of the master on which
	// the subscription sits instead of the master (the relay tier,
	// relay.go). Every command, PUBLISH included, stays on Addrs.
	SubscribeAddrs []string
	// MaxLag is coherence.max_lag: the store publishes a heartbeat every
	// MaxLag/4 and Proven reports when one last came back (heartbeat.go).
	// 0 = no heartbeats.
	MaxLag time.Duration

	// goStall, tests only, runs before each write and read on a go-redis
	// connection (late.Dialer): how a test makes the sidecar late there.
	goStall late.Stall
	// leanStall, tests only, is the lean client's (mget.Options.Stall).
	leanStall late.Stall
	// clock, tests only, is the clock the heartbeat compares with Redis's
	// (skew.go); nil: time.Now.
	clock func() time.Time
}

// Store is the L2 tier. It implements cache.Store and adds tag
// invalidation, purge and leases.
type Store struct {
	rdb    redis.UniversalClient
	lean   *mget.Pool            // the L2 hit's MGET on a single Redis (internal/cache/l2/mget); nil in Cluster and Sentinel
	sub    redis.UniversalClient // the subscription's, with its own timeouts (subscribe.go); swapped under psMu by relay failover
	relay  int                   // index in SubscribeAddrs of sub's relay (relay.go); subscriber goroutine only
	opts   Options
	log    *slog.Logger
	origin string // this replica's id in published messages

	up        atomic.Bool
	refusedAt atomic.Int64 // unix ns since when Redis has refused writes; 0: it takes them (refusing.go)
	tookAt    atomic.Int64 // unix ns of the last write Redis took (refusing.go)
	fails     atomic.Int32
	okAt      atomic.Int64 // unix ns of the last call Redis answered
	state     sync.Mutex   // orders transitions and their callbacks

	queue   chan op
	dropped atomic.Uint64
	proof   *proof.Tracker // what this replica's heartbeats prove (heartbeat.go)
	guesses *guess.Table   // each key's tags, for reads without the script (fastread.go)

	legacyBump atomic.Bool      // Redis runs no script flags (epoch.go)
	refusals   atomic.Uint64    // epoch raises Redis refused (refused.go)
	lostAt     atomic.Int64     // when a refusal was last told to the fleet (unix ns, refused.go)
	lostLog    *lograte.Limiter // warnings about them (own refusals)
	peerLog    *lograte.Limiter // and about peers' (peerLost): one never crowds out the other
	skewLog    *lograte.Limiter // warnings about a skewed clock
	skew       clockSkew        // this clock against Redis's (skew.go)

	psMu       sync.Mutex
	ps         *redis.PubSub // the current subscription, closed by Close
	subscribed atomic.Bool   // Redis confirmed the current subscription

	closed atomic.Bool
	stop   chan struct{}      // closed by Close
	exited chan struct{}      // closed when the writer has returned
	cancel context.CancelFunc // stops the subscriber
	wg     sync.WaitGroup
	once   sync.Once
}

// Stats are the store's counters, for metrics and tests.
type Stats struct {
	Dropped uint64 // writes dropped: queue full or Redis down
}

// New connects to Redis and starts the writer, the subscriber and the
// breaker's probe. It does not fail when Redis is unreachable: the store
// starts down and comes up when a probe succeeds. ctx bounds only the
// initial PING.
func New(ctx context.Context, opts Options) (*Store, error) {
	if len(opts.Addrs) == 0 {
		return nil, errors.New("l2: no redis address")
	}
	if len(opts.SubscribeAddrs) > 0 && (opts.Cluster || len(opts.Addrs) > 1) && opts.MasterName == "" {
		return nil, errors.New("l2: subscribe addrs need a single master or Sentinel, not a Cluster")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = DefaultProbeInterval
	}
	if opts.FailureThreshold <= 0 {
		opts.FailureThreshold = DefaultFailureThreshold
	}
	if opts.clock == nil {
		opts.clock = time.Now
	}
	if opts.LeaseHold <= 0 {
		opts.LeaseHold = max(minLeaseHold, 4*opts.Timeout)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)

	s := &Store{
		rdb:     redis.NewUniversalClient(clientOptions(opts)),
		opts:    opts,
		log:     log.With("component", "l2"),
		origin:  hex.EncodeToString(id),
		queue:   make(chan op, opts.QueueSize),
		guesses: guess.New(),
		proof:   proof.New(proofGrace(opts)),
		lostLog: lograte.New(1, lostLogEvery, nil),
		peerLog: lograte.New(1, lostLogEvery, nil),
		skewLog: lograte.New(1, lostLogEvery, nil),
		stop:    make(chan struct{}),
		exited:  make(chan struct{}),
	}
	if opts.MasterName == "" && !opts.Cluster && len(opts.Addrs) == 1 {
		s.lean = mget.New(leanOptions(opts, mget.DefaultConns()))
	}
	s.relay = firstRelay(s.origin, len(opts.SubscribeAddrs))
	s.sub = s.newSub()

	pctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	err := s.rdb.Ping(pctx).Err()
	cancel()
	s.up.Store(err == nil)
	if err != nil {
		s.log.Warn("redis unreachable, starting degraded", "err", err)
	}
	if opts.OnStateChange != nil {
		opts.OnStateChange(err == nil)
	}

	subCtx, subCancel := context.WithCancel(context.Background())
	s.cancel = subCancel
	s.wg.Add(4)
	go s.heartbeat()
	go s.writer()
	go s.probe()
	go s.subscribe(subCtx)
	return s, nil
}

// leanOptions are the lean client's for o's one Redis, conns connections
// at most.
func leanOptions(o Options, conns int) mget.Options {
	return mget.Options{
		Addr: o.Addrs[0], Username: o.Username, Password: o.Password, DB: o.DB,
		MaxConns: conns, Stall: o.leanStall,
	}
}

// clientOptions turns Options into go-redis options tuned so that no call
// outlives Timeout: go-redis' defaults (5 s timeouts, 3 retries, 5 dial
// attempts 100 ms apart, a pool wait of ReadTimeout+1 s) each exceed it.
func clientOptions(o Options) *redis.UniversalOptions {
	return &redis.UniversalOptions{
		Addrs:         o.Addrs,
		MasterName:    o.MasterName,
		IsClusterMode: o.Cluster && o.MasterName == "", // Sentinel wins
		Username:      o.Username,
		Password:      o.Password,
		DB:            o.DB,

		// Without this a context deadline does not cut a command already
		// on the wire; the socket timeouts below would.
		ContextTimeoutEnabled: true,
		DialTimeout:           o.Timeout,
		ReadTimeout:           o.Timeout,
		WriteTimeout:          o.Timeout,
		// A quarter: a pool wait and its retry both end before the
		// call's deadline, as redis.ErrPoolTimeout, which is lateness
		// (internal/cache/l2/late), not the context's error, which counts.
		PoolTimeout:   o.Timeout / 4,
		DialerRetries: 1,
		// One retry covers a pooled connection that died with a restarted
		// server; the context deadline still bounds the pair.
		MaxRetries:      1,
		MinRetryBackoff: time.Millisecond,
		MaxRetryBackoff: 4 * time.Millisecond,

		// Each connection reports the sidecar's lateness in a form
		// go-redis does not retry (late.Dialer), as the lean client does.
		Dialer: late.Dialer(late.DialerOptions{Timeout: o.Timeout, Stall: o.goStall}),

		DisableIdentity:          true, // one round trip less per new connection
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

// Up reports whether the breaker is closed (Redis considered reachable).
func (s *Store) Up() bool { return s.up.Load() }

// Stats returns the store's counters.
func (s *Store) Stats() Stats { return Stats{Dropped: s.dropped.Load()} }

// Close stops the background goroutines, writing what is queued (bounded by
// Timeout), and closes the connections. It is safe to call more than once.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		s.closed.Store(true)
		close(s.stop)
		s.cancel()
		s.wg.Wait()
		if s.lean != nil {
			s.lean.Close()
		}
		err = errors.Join(s.rdb.Close(), s.sub.Close())
	})
	return err
}

func (s *Store) key(kind, k string) string { return s.opts.Prefix + kind + k }

func (s *Store) entryKey(k string) string { return s.key("e:", k) }
func (s *Store) leaseKey(k string) string { return s.key("l:", k) }
func (s *Store) channel() string          { return s.channelPrefix() + "invalidate" }

// admit is the breaker's gate, checked before any call to Redis.
func (s *Store) admit() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if !s.up.Load() {
		return ErrDown
	}
	return nil
}

// done records the outcome of a call to Redis. parent is the caller's
// context: a call cut short because the caller went away says nothing
// about Redis and is not counted, nor is one that failed because the
// sidecar was late (internal/cache/l2/late).
func (s *Store) done(parent context.Context, err error) {
	s.doneAt(parent, err, time.Time{})
}

// doneAt is done for a call that began at start (zero: now), which a
// success records as the time Redis last answered: an L2 hit, which has
// read the clock for its deadline, does not read it again.
func (s *Store) doneAt(parent context.Context, err error, start time.Time) {
	if err == nil || errors.Is(err, redis.Nil) {
		if s.fails.Load() != 0 {
			s.fails.Store(0)
		}
		if start.IsZero() {
			start = time.Now()
		}
		s.okAt.Store(start.UnixNano())
		return
	}
	if WritesRefused(err) {
		s.refusing(err) // refusing.go
	}
	if parent.Err() != nil || !unavailable(err) {
		if late.Is(err) || errors.Is(err, redis.ErrPoolTimeout) {
			s.log.Debug("redis call late, not counted against redis", "err", err)
		}
		return
	}
	if int(s.fails.Add(1)) >= s.opts.FailureThreshold {
		s.setUp(false, err)
	}
}

// unavailable reports whether err says Redis cannot serve (timeout, refused,
// reset, a node loading or without quorum) rather than that one command
// was wrong.
func unavailable(err error) bool {
	if late.Is(err) || errors.Is(err, redis.ErrPoolTimeout) {
		return false // the sidecar's lateness (internal/cache/l2/late)
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		for _, p := range []string{"LOADING", "CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN", "READONLY"} {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	// Anything else is the transport: a deadline, a refused or reset
	// connection, a pool that could not hand out one in time.
	return true
}

// WritesRefused reports whether err is Redis refusing every write while
// it answers, whatever the keys: its last snapshot failed (MISCONF, while
// stop-writes-on-bgsave-error holds), a master short of the replicas
// min-replicas-to-write asks for (NOREPLICAS), a read replica at the
// master's address (READONLY), memory full where a script cannot say
// allow-oom (OOM, Redis before 7), a script running past its time (BUSY).
// Such a refusal is Redis's state, not the command's: the same raise is
// taken once it passes, so a caller replaying invalidations keeps them
// (internal/server) rather than give a tag up as one Redis will never
// take. PING and PUBLISH may still pass meanwhile (NOREPLICAS, OOM), so
// the breaker may stay closed through it.
func WritesRefused(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	for _, p := range []string{"MISCONF", "NOREPLICAS", "READONLY", "OOM", "BUSY"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

func (s *Store) setUp(up bool, cause error) {
	s.state.Lock()
	defer s.state.Unlock()
	if s.up.Load() == up {
		return
	}
	s.fails.Store(0)
	s.up.Store(up)
	if up {
		s.log.Info("redis reachable again")
	} else {
		s.log.Warn("redis unavailable, degrading to L1 and upstream", "err", cause)
	}
	if s.opts.OnStateChange != nil {
		s.opts.OnStateChange(up)
	}
}

// probe PINGs Redis every ProbeInterval. While the breaker is open a
// success closes it. While it is closed a failure counts like any other, so
// a store that serves no traffic (every read an L1 hit, or an idle pod)
// still notices an outage: sidecache_l2_up and /readyz must not say "up"
// about a Redis that is gone just because nobody asked it anything. While
// the breaker is closed and some call (a heartbeat, every MaxLag/4) was
// answered within the interval, the PING is skipped: it would prove
// nothing more, and across a fleet it is 2·N commands a second for Redis.
func (s *Store) probe() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		up := s.up.Load()
		if up && s.writesUnproven() {
			s.checkWrites() // refusing.go
		}
		if up && time.Since(time.Unix(0, s.okAt.Load())) < s.opts.ProbeInterval {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
		err := s.rdb.Ping(ctx).Err()
		cancel()
		switch {
		case !up && err == nil:
			s.setUp(true, nil)
		case up:
			s.done(context.Background(), err)
		}
	}
}

// withTimeout is the per-operation deadline every Redis call runs under.
func (s *Store) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.Timeout)
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("l2: %s: %w", op, err)
}
