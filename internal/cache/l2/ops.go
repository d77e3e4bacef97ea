package l2

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/redisbudget"
)

// Batch bounds for the writer: one pipeline carries at most this many
// queued operations or about this many bytes, whichever comes first, so a
// burst of large bodies does not make one pipeline outlive Timeout.
const (
	maxBatch      = 256
	maxBatchBytes = 1 << 20
)

var _ cache.Store = (*Store)(nil)

var errNoHeader = errors.New("no header")

type opKind uint8

const (
	opSet     opKind = iota
	opDel            // drop an entry found corrupt
	opRelease        // compare-and-mark a lease released (ttl > 0: hit-for-pass for ttl)
	opUnpass         // drop a lease's hit-for-pass mark
	opFlush          // close done once everything before it is written
)

// op is one queued write. The writer goroutine owns it once enqueued.
type op struct {
	kind opKind
	key  string
	val  []byte // opSet: encoded entry; opRelease: lease token
	ttl  time.Duration
	tags []string
	done chan struct{}
}

// Get reads key from Redis, checked against its tags' epochs (epoch.go) in
// the same round trip (fastread.go: one MGET once the key's tags are
// known): an entry invalidated since its request left is a miss. A missing key is a miss; a value that does not decode (another
// codec version, garbage) is a miss too, logged and deleted. An error means
// L2 could not answer within Timeout or is down.
func (s *Store) Get(ctx context.Context, key string) (*cache.Entry, bool, error) {
	return s.GetAt(ctx, key, time.Now())
}

// GetAt is Get for a caller that has just read the clock: start, from
// which the read's Timeout is counted. An L2 hit read it three times on
// its way (cache.Tiered's judgement, this deadline, the lean client's
// deadline slack), each reading up to 0.3 µs on a loaded virtual machine;
// it now reads it once (cache.Tiered.lookup).
func (s *Store) GetAt(ctx context.Context, key string, start time.Time) (*cache.Entry, bool, error) {
	if err := s.usable(); err != nil {
		return nil, false, wrap("get", err)
	}
	sp, err := s.begin(ctx, start)
	if err != nil {
		return nil, false, wrap("get", err)
	}
	b, payload, done, err := s.getLean(ctx, key, start, sp.dl)
	if !done {
		cctx, cancel := context.WithDeadline(ctx, sp.dl)
		b, err = s.getChecked(cctx, key)
		cancel()
	}
	s.end(ctx, sp, err)
	if err != nil {
		return nil, false, wrap("get", err)
	}
	if b == nil {
		return nil, false, nil
	}
	if payload != nil {
		return s.decodePayload(key, payload) // the header judged, not parsed again
	}
	return s.decode(key, b)
}

// GetMany reads several keys in one pipeline: one round trip (one per
// node in a Cluster, where the keys may live in different slots, plus one
// for the epochs), where a loop of Get would make one per key. A key whose
// header names a tag this replica did not guess costs one more (the
// script; fastread.go). A nil element is a miss.
func (s *Store) GetMany(ctx context.Context, keys []string) ([]*cache.Entry, error) {
	out := make([]*cache.Entry, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	if err := s.usable(); err != nil {
		return out, wrap("get many", err)
	}
	cctx, cancel, sp, err := s.withBudget(ctx)
	defer cancel()
	if err != nil {
		return out, wrap("get many", err)
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]redis.Cmder, len(keys))
	guessed := make([][]string, len(keys))
	for i, k := range keys {
		switch eks, ok := s.guesses.Get(k); {
		case s.isCluster():
			cmds[i] = pipe.Get(cctx, s.entryKey(k))
		case ok:
			// As getGuessed: one MGET per key, the script for the keys
			// whose tags are not known (fastread.go).
			guessed[i] = eks
			cmds[i] = pipe.MGet(cctx, append([]string{s.entryKey(k)}, eks...)...)
		default:
			cmds[i] = pipe.Eval(cctx, readScript, []string{s.entryKey(k)}, s.key("v:", ""))
		}
	}
	_, err = pipe.Exec(cctx)
	if errors.Is(err, redis.Nil) {
		err = nil // some keys missing: each command says which
	}
	vals := make([][]byte, len(keys))
	if err == nil {
		var unknown []int
		for i, c := range cmds {
			switch c := c.(type) {
			case *redis.StringCmd:
				vals[i], _ = c.Bytes()
			case *redis.SliceCmd:
				var v verdict
				if vals[i], _, v = s.judge(stringsOf(c.Val()), guessed[i]); v == verdictUnknown {
					unknown = append(unknown, i)
				}
			case *redis.Cmd:
				if v, err := c.Text(); err == nil {
					vals[i] = []byte(v)
					s.learnHeader(keys[i], vals[i])
				}
			}
		}
		for _, i := range unknown {
			if vals[i], err = s.getScripted(cctx, keys[i]); err != nil {
				break
			}
		}
		if s.isCluster() {
			vals, err = s.epochsOf(cctx, vals)
		}
	}
	s.end(ctx, sp, err)
	if err != nil {
		return out, wrap("get many", err)
	}
	for i, b := range vals {
		if b == nil {
			continue
		}
		if e, ok, _ := s.decode(keys[i], b); ok {
			out[i] = e
		}
	}
	return out, nil
}

func (s *Store) decode(key string, b []byte) (*cache.Entry, bool, error) {
	_, _, payload, ok := header(b)
	if !ok {
		return s.dropUndecodable(key, errNoHeader)
	}
	return s.decodePayload(key, payload)
}

// decodePayload is decode of a value whose header was parsed already:
// payload is the codec's bytes after it.
func (s *Store) decodePayload(key string, payload []byte) (*cache.Entry, bool, error) {
	// payload is always part of a reply's own allocation (the lean
	// client's, or go-redis's string of the reply), read once and never
	// written: the entry may keep its body in it.
	e, err := cache.UnmarshalOwned(payload)
	if err != nil {
		return s.dropUndecodable(key, err)
	}
	return e, true, nil
}

// dropUndecodable makes a value that does not decode a miss, and deletes it.
func (s *Store) dropUndecodable(key string, err error) (*cache.Entry, bool, error) {
	s.log.Warn("dropping undecodable entry", "key", key, "err", err)
	_ = s.enqueue(op{kind: opDel, key: key})
	return nil, false, nil
}

// Set stores e under key for what is left of its lifetime (Entry.Lifetime
// counted from StoredAt; the whole Lifetime when StoredAt is zero) and adds
// key to each of e.Tags. It never waits for Redis: the write is queued and
// a background writer sends queued writes in pipelines. A full queue or a
// down Redis drops the write, counted in Stats, and returns ErrQueueFull
// or ErrDown (wrapped), which callers may ignore.
func (s *Store) Set(ctx context.Context, key string, e *cache.Entry) error {
	if err := s.usable(); err != nil {
		s.dropped.Add(1)
		return wrap("set", err)
	}
	if b := redisbudget.From(ctx); b != nil && b.Left(s.opts.Timeout) <= 0 {
		// The request's Redis budget is spent: Redis is slow enough that
		// this request went on without it, and so does its store.
		s.dropped.Add(1)
		return wrap("set", ErrBudget)
	}
	ttl := e.Lifetime()
	if !e.StoredAt.IsZero() {
		ttl = e.Remaining(time.Now())
	}
	if ttl <= 0 {
		return nil
	}
	ttl = max(ttl, time.Millisecond) // PX has millisecond resolution
	val, err := encodeValue(e, s.redisStamp(e.StoredAt))
	if err != nil {
		s.dropped.Add(1)
		return wrap("set", err)
	}
	s.learn(key, e.Tags) // the next read of key needs no script (fastread.go)
	return wrap("set", s.enqueue(op{kind: opSet, key: key, val: val, ttl: ttl, tags: e.Tags}))
}

// Delete removes keys from L2 and tells the other replicas to drop them
// from their L1.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	if err := s.admit(); err != nil {
		return wrap("delete", err)
	}
	s.flushQueued(ctx)
	if err := s.unlink(ctx, s.rdb, prefixed(keys, s.entryKey)); err != nil {
		return wrap("delete", err)
	}
	return wrap("delete", s.publish(ctx, Invalidation{Keys: keys}))
}

// Flush waits until every write queued before it has been sent to Redis
// (or dropped because Redis is down), or ctx ends.
func (s *Store) Flush(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	done := make(chan struct{})
	select {
	case s.queue <- op{kind: opFlush, done: done}:
	case <-s.stop:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-s.exited: // closed meanwhile; the marker may never be reached
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flushQueued makes a synchronous delete or invalidation land after the
// writes queued before it, so an entry stored just before an invalidation
// cannot reappear just after it. It is best effort, bounded by Timeout,
// and by what is left of the request's Redis budget: the wait is charged
// to it, as the call that follows waits on Redis after it.
func (s *Store) flushQueued(ctx context.Context) {
	fctx, cancel, sp, err := s.withBudget(ctx)
	defer cancel()
	if err != nil {
		return
	}
	_ = s.Flush(fctx)
	if sp.b != nil {
		sp.b.Spend(time.Since(sp.start))
	}
}

func (s *Store) enqueue(o op) error {
	if s.closed.Load() {
		return ErrClosed
	}
	select {
	case s.queue <- o:
		return nil
	default:
		s.dropped.Add(1)
		return ErrQueueFull
	}
}

// writer drains the queue in batches, one pipeline per batch.
func (s *Store) writer() {
	defer s.wg.Done()
	defer close(s.exited)
	batch := make([]op, 0, maxBatch)
	for {
		select {
		case o := <-s.queue:
			batch = s.fill(append(batch[:0], o))
			s.write(batch)
		case <-s.stop:
			s.drain(batch[:0])
			return
		}
	}
}

// fill adds what is already queued to batch, without waiting.
func (s *Store) fill(batch []op) []op {
	size := len(batch[0].val)
	for len(batch) < maxBatch && size < maxBatchBytes {
		select {
		case o := <-s.queue:
			batch = append(batch, o)
			size += len(o.val)
		default:
			return batch
		}
	}
	return batch
}

// drain writes what is left in the queue at Close, within one Timeout.
func (s *Store) drain(batch []op) {
	deadline := time.Now().Add(s.opts.Timeout)
	for time.Now().Before(deadline) {
		select {
		case o := <-s.queue:
			batch = s.fill(append(batch[:0], o))
			s.write(batch)
		default:
			return
		}
	}
}

// write sends one batch. Lease releases go in a second pipeline, after the
// first has been answered: in a cluster one pipeline runs on several nodes
// at once, and a waiter must not see a lease gone before its fill landed.
func (s *Store) write(batch []op) {
	var flushes []chan struct{}
	defer func() {
		for _, d := range flushes {
			close(d)
		}
	}()
	down := !s.up.Load()

	// Commands carry a plain context; exec bounds each pipeline by Timeout.
	ctx := context.Background()
	pipe := s.rdb.Pipeline()
	release := s.rdb.Pipeline()
	for _, o := range batch {
		if o.kind == opFlush {
			flushes = append(flushes, o.done)
			continue
		}
		if down {
			s.dropped.Add(1)
			continue
		}
		switch o.kind {
		case opSet:
			// The epoch keys first: on one node an entry is never
			// readable without them (one pipeline is one connection
			// per node, and Redis runs a connection's commands in
			// order). In a Cluster an entry and its epoch keys may
			// live on different masters, written at once: for that
			// moment the entry reads as a miss (its epochs missing),
			// never as a stale answer.
			for _, t := range o.tags {
				pipe.Eval(ctx, touchScript, []string{s.epochKey(t)}, max(o.ttl, epochFloor).Milliseconds(), storedAt(o.val))
			}
			pipe.Set(ctx, s.entryKey(o.key), o.val, o.ttl)
		case opDel:
			pipe.Unlink(ctx, s.entryKey(o.key))
		case opRelease:
			release.Eval(ctx, releaseScript, []string{s.leaseKey(o.key)}, s.releaseArgs(string(o.val), o.ttl)...)
		case opUnpass:
			release.Eval(ctx, unpassScript, []string{s.leaseKey(o.key)}, passMark)
		}
	}
	s.exec(pipe)
	s.exec(release)
}

func (s *Store) exec(pipe redis.Pipeliner) {
	n := pipe.Len()
	if n == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	_, err := pipe.Exec(ctx)
	s.done(context.Background(), err)
	if err != nil {
		s.log.Warn("queued writes failed", "commands", n, "err", err)
	} else {
		s.tookWrite() // refusing.go
	}
}

// unlink removes keys with one UNLINK per key in pipelines of bounded
// length, each within Timeout: keys of one call may live in different
// cluster slots, where a multi-key UNLINK fails with CROSSSLOT.
func (s *Store) unlink(ctx context.Context, c redis.Cmdable, keys []string) error {
	const chunk = 1024
	for len(keys) > 0 {
		n := min(len(keys), chunk)
		cctx, cancel, sp, err := s.withBudget(ctx)
		if err != nil {
			cancel()
			return err
		}
		pipe := c.Pipeline()
		for _, k := range keys[:n] {
			pipe.Unlink(cctx, k)
		}
		_, err = pipe.Exec(cctx)
		cancel()
		s.end(ctx, sp, err)
		if err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

func prefixed(keys []string, f func(string) string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = f(k)
	}
	return out
}
