package l2

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache"
)

// releaseScript deletes a lease only if it still holds the caller's token:
// a holder whose lease expired must not delete the next holder's.
const releaseScript = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`

// WaitFill polls with a backoff between these bounds: the first checks
// catch a fill already under way, later ones keep the load on Redis low.
const (
	waitMin = 2 * time.Millisecond
	waitMax = 20 * time.Millisecond
)

// Lease tries to become the one replica that fills key, so that concurrent
// misses across the cluster make one upstream call. The lease expires
// after ttl, so a holder that dies does not block the others for longer.
//
// The holder stores the entry with Set and then calls release. release
// never blocks: it is queued behind the holder's earlier Set, so a waiter
// never sees the lease gone before the entry is in Redis. It is safe to
// call more than once, and it deletes the lease only while it still holds
// this holder's token. When acquired is false release does nothing.
//
// An error (Redis down or slow) means no lease either way: the caller
// fetches on its own, as it would without L2.
func (s *Store) Lease(ctx context.Context, key string, ttl time.Duration) (release func(), acquired bool, err error) {
	noop := func() {}
	if err := s.admit(); err != nil {
		return noop, false, wrap("lease", err)
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)

	cctx, cancel := s.withTimeout(ctx)
	ok, err := s.rdb.SetNX(cctx, s.leaseKey(key), token, max(ttl, time.Millisecond)).Result()
	cancel()
	s.done(ctx, err)
	if err != nil {
		return noop, false, wrap("lease", err)
	}
	if !ok {
		return noop, false, nil
	}
	var once sync.Once
	return func() { once.Do(func() { s.release(key, token) }) }, true, nil
}

func (s *Store) release(key, token string) {
	if s.enqueue(op{kind: opRelease, key: key, val: []byte(token)}) == nil {
		return
	}
	// The queue is full or closed: release now rather than make the other
	// replicas wait for the ttl. Whatever the holder queued before is lost
	// or about to be written, so waiters may fetch on their own.
	if s.admit() != nil {
		return
	}
	ctx, cancel := s.withTimeout(context.Background())
	defer cancel()
	err := s.rdb.Eval(ctx, releaseScript, []string{s.leaseKey(key)}, token).Err()
	s.done(context.Background(), err)
}

// WaitFill is for a replica that did not get the lease: it waits until an
// entry stored after newer appears under key in L2 (returning it; the zero
// newer accepts any entry), the lease disappears without a fill (the
// holder failed or the response was not cacheable), or maxWait passes, and
// then reports a miss so the caller fetches on its own.
//
// It polls, with a backoff from 2 ms to 20 ms, rather than listening for a
// "filled" notice on pub/sub: a poll cannot miss a notice sent before it
// subscribed, needs no per-key subscription bookkeeping, and costs two
// cheap commands per check on a path that is already a miss.
//
// newer matters once a stale copy exists: the waiter holds it, and
// returning on it would send every replica to the upstream.
func (s *Store) WaitFill(ctx context.Context, key string, maxWait time.Duration, newer time.Time) (*cache.Entry, bool, error) {
	deadline := time.Now().Add(maxWait)
	wait := waitMin
	for {
		e, found, held, err := s.check(ctx, key, newer)
		if err != nil || found {
			return e, found, wrap("wait fill", err)
		}
		if !held {
			// The lease is gone. In a cluster the entry and the lease live
			// on different nodes, so the GET above may have run before the
			// holder's SET landed: look once more.
			e, found, _, err := s.check(ctx, key, newer)
			return e, found, wrap("wait fill", err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, false, nil
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, false, wrap("wait fill", ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, waitMax)
	}
}

// check reads the lease and the entry in one round trip (two in Cluster,
// for the epochs), the lease first so that on one server a released lease
// implies the fill is visible. An entry invalidated since its request left
// is not found: a waiter must not take the version a write replaced.
func (s *Store) check(ctx context.Context, key string, newer time.Time) (e *cache.Entry, found, held bool, err error) {
	if err := s.admit(); err != nil {
		return nil, false, false, err
	}
	cctx, cancel := s.withTimeout(ctx)
	defer cancel()
	pipe := s.rdb.Pipeline()
	exists := pipe.Exists(cctx, s.leaseKey(key))
	var get redis.Cmder
	if s.isCluster() {
		get = pipe.Get(cctx, s.entryKey(key))
	} else {
		get = pipe.Eval(cctx, readScript, []string{s.entryKey(key)}, s.key("v:", ""))
	}
	_, _ = pipe.Exec(cctx)
	err = exists.Err()
	if gerr := get.Err(); err == nil && !errors.Is(gerr, redis.Nil) {
		err = gerr
	}
	var b []byte
	if err == nil {
		switch g := get.(type) {
		case *redis.StringCmd:
			b, _ = g.Bytes()
			var vals [][]byte
			if vals, err = s.epochsOf(cctx, [][]byte{b}); err == nil {
				b = vals[0]
			}
		case *redis.Cmd:
			if v, gerr := g.Text(); gerr == nil {
				b = []byte(v)
			}
		}
	}
	s.done(ctx, err)
	if err != nil {
		return nil, false, false, err
	}
	held = exists.Val() > 0
	if b != nil {
		e, found, _ = s.decode(key, b)
	}
	if found && !e.StoredAt.After(newer) {
		e, found = nil, false // the copy the waiter already holds
	}
	return e, found, held, nil
}
