package l2

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// The subscription's connection is not a command's: it is dialled once and
// then lives for hours, and while it is down this replica can prove
// nothing. Dialling it under the 100 ms command Timeout failed over and
// over on a loaded host, and every failure was retried at a fixed 100 ms by
// every replica at once: hundreds of replicas made a reconnection storm
// that kept Redis busy. So it has its own client with timeouts sized for a
// dial that may wait in a full accept queue (subTimeout), and failed
// attempts back off with jitter (retryDelay).

// retryCap bounds the wait between resubscribe attempts, so a replica
// hears the channel again within about a second of Redis answering.
const retryCap = time.Second

// subTimeout bounds the subscription's dial, handshake and writes: MaxLag
// (the proof needs 3/4 of it after the subscription is back anyway), at
// least a second, and never less than the command Timeout.
func subTimeout(o Options) time.Duration {
	return max(o.MaxLag, time.Second, o.Timeout)
}

// subOptions are clientOptions with the subscription's timeouts.
func subOptions(o Options) *redis.UniversalOptions {
	u := clientOptions(o)
	d := subTimeout(o)
	u.DialTimeout, u.ReadTimeout, u.WriteTimeout, u.PoolTimeout = d, d, d, d
	// The subscription's receive loop tells a receive timeout (PING the
	// quiet connection) from a broken one (resubscribe) by net.Error:
	// net's dialer and sockets, whose timeouts stay timeouts.
	u.Dialer = nil
	return u
}

// retryDelay is the wait before resubscribe attempt n+1 after n failures
// in a row: retryEvery doubled per failure up to retryCap, of which a
// random upper half (rnd(k) returns a number in [0, k)), so that replicas
// that lost Redis together do not redial together.
func retryDelay(n int, rnd func(int64) int64) time.Duration {
	d := retryEvery
	for i := 0; i < n && d < retryCap; i++ {
		d *= 2
	}
	d = min(d, retryCap)
	return d/2 + time.Duration(rnd(int64(d/2)+1))
}

// beatChannel is where this replica publishes its heartbeats (heartbeat.go).
func (s *Store) beatChannel() string { return s.channelPrefix() + "beat:" + s.origin }

// Sharded pub/sub (Options.ShardedPubSub, Redis Cluster). With classic
// pub/sub a Cluster node forwards every PUBLISH over the cluster bus to
// every other node, and go-redis sends PUBLISH to any node: a peer's
// invalidation published on node A reaches this replica's node X over the
// bus, while its own beat published elsewhere may be delivered first, so
// the proof could run ahead of what was applied. SPUBLISH runs on the
// owner of the channel's slot only, and the hash tag puts the invalidation
// channel and every beat channel in one slot: one node runs all of them in
// order and delivers them on the one connection that SSUBSCRIBEd both, as
// a single Redis does.
func (s *Store) sharded() bool { return s.opts.ShardedPubSub && s.isCluster() }

// channelPrefix starts every channel name: the key prefix, in sharded mode
// inside a hash tag that names one slot for all of them.
func (s *Store) channelPrefix() string {
	if s.sharded() {
		return "{" + s.opts.Prefix + "coherence}"
	}
	return s.opts.Prefix
}

// subscribeAll subscribes the subscription client to channels().
func (s *Store) subscribeAll(ctx context.Context) *redis.PubSub {
	if s.sharded() {
		return s.sub.SSubscribe(ctx, s.channels()...)
	}
	return s.sub.Subscribe(ctx, s.channels()...)
}

// reloadSlots asks the cluster again, in the background, which master
// serves which slot, for the subscription's client: after a failover or a
// resharding its map still names the slot's old owner, where a new
// SSUBSCRIBE is answered MOVED (go-redis follows MOVED for commands, not
// for a subscription), and it would otherwise be refreshed only every 10 s
// and only when asked. The subscriber retries with backoff meanwhile.
func (s *Store) reloadSlots() {
	if cc, ok := s.sub.(*redis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
}

// publishIn queues a publish of msg on channel in pipe.
func (s *Store) publishIn(ctx context.Context, pipe redis.Pipeliner, channel string, msg []byte) *redis.IntCmd {
	if s.sharded() {
		return pipe.SPublish(ctx, channel, msg)
	}
	return pipe.Publish(ctx, channel, msg)
}

// channels are what the subscriber listens to, on one connection: the
// shared invalidation channel and this replica's own beat channel.
func (s *Store) channels() []string { return []string{s.channel(), s.beatChannel()} }

// publishOn publishes inv on channel, bounded by Timeout and by what is
// left of ctx's Redis budget (a request's delete).
func (s *Store) publishOn(ctx context.Context, channel string, inv Invalidation) error {
	msg, err := s.message(inv)
	if err != nil {
		return err
	}
	cctx, cancel, sp, err := s.withBudget(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	if s.sharded() {
		err = s.rdb.SPublish(cctx, channel, msg).Err()
	} else {
		err = s.rdb.Publish(cctx, channel, msg).Err()
	}
	s.end(ctx, sp, err)
	return err
}
