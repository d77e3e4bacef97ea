package l2

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Subscriber timing: a subscription quiet for idleCheck sends a PING to
// prove the connection alive, and is rebuilt after maxUnanswered PINGs in
// a row get no answer (a peer gone without closing the socket). A false
// alarm costs the proof for the L1 entries older than MaxLag (see Floor),
// hence the patience. retryEvery is the first wait between resubscribe
// attempts while Redis is down; retryDelay backs off from it.
const (
	idleCheck     = time.Second
	maxUnanswered = 3
	retryEvery    = 100 * time.Millisecond
)

// Invalidation is the message replicas exchange on the channel
// Prefix+"invalidate", as JSON: {"tags":[..],"keys":[..],"all":true,"origin":"…"}.
// Keys are cache keys as the proxy knows them (without prefix); a tag
// invalidation carries only Tags, which peers resolve through their own L1
// tag index. Beat is a heartbeat (see heartbeat.go), never delivered to
// OnInvalidate. Gap is never sent: the subscriber sets it, with All, when
// it rebuilt the subscription (messages may have been lost; see Floor).
type Invalidation struct {
	Tags   []string `json:"tags,omitempty"`
	Keys   []string `json:"keys,omitempty"`
	Tags64 []string `json:"tags64,omitempty"` // tags that are not UTF-8 (wire.go)
	Keys64 []string `json:"keys64,omitempty"`
	All    bool     `json:"all,omitempty"`
	Origin string   `json:"origin"`
	Beat   *Beat    `json:"beat,omitempty"`
	// Lost says that Redis refused to raise an epoch that a write
	// needed (refused.go): every replica sets its floor at once.
	// Delivered to OnInvalidate as All with Gap.
	Lost bool `json:"lost,omitempty"`
	// DB is the Redis database of the store that sent it, on every
	// message of this release (0 included): pub/sub channels are global
	// across a server's databases, so two fleets sharing a Redis and a
	// prefix but not a db publish on one channel, and each applied the
	// other's tags, purges and Losts. A message whose DB is not this
	// store's is ignored. One without it comes from a previous release,
	// whose db cannot be told, and is applied as before: a rolling
	// deploy's old and new pods keep hearing each other (a channel named
	// after the db would part them until the last old pod is gone).
	// Heartbeats never crossed: each replica hears only its own beat
	// channel, and counts only beats of its own origin.
	DB  *int `json:"db,omitempty"`
	Gap bool `json:"-"`
}

// InvalidateTags raises the epoch of each tag (epoch.go), so that no
// replica reads an entry carrying one of them that was fetched before now,
// and tells the other replicas to drop them from their L1. Both go in one
// pipeline, the epochs first, so the message is published even when an
// epoch could not be written, and the error goes back to the caller; one
// round trip, bounded by Timeout, and with the flush before it by what is
// left of ctx's Redis budget (a write's request waits on both: a budget
// spent is an error, and the caller replays the tags). It does not consult the breaker: a write
// is rare, and its invalidation must reach a Redis that answers again as
// soon as it does. The caller drops its own L1 entries.
//
// Entries are not deleted: an invalidated entry reads as a miss and is
// overwritten by the next fill or expires with its TTL.
func (s *Store) InvalidateTags(ctx context.Context, tags ...string) error {
	return s.invalidateTags(ctx, tags, time.Time{})
}

// ReplayTags is InvalidateTags for tags whose raise failed before (the
// replay, internal/server), the latest of them queued at added (after its
// write's answer). A raise Redis refuses again is told to the fleet again
// (refused.go), for the pods started since; but not while a refusal told
// after added is younger than MaxLag/2: every replica that heard it
// already refuses what these writes replaced, and Redis may refuse every
// write for as long as a disk stays full (WritesRefused), the replay
// keeping its tags meanwhile, where a Lost every MaxLag/8 from each replica
// holding some, delivered to every replica, would make the fleet's Lost
// messages O(replicas²). A pod started since hears the next one before
// its heartbeats prove anything (¾ MaxLag of them after its first), so it
// never trusts an entry the refused raise should have invalidated.
func (s *Store) ReplayTags(ctx context.Context, added time.Time, tags ...string) error {
	if added.IsZero() {
		added = time.Now() // nothing known: told as a write's own would be
	}
	return s.invalidateTags(ctx, tags, added)
}

// invalidateTags is InvalidateTags, or ReplayTags for tags added at
// replay (zero: a write's own invalidation).
func (s *Store) invalidateTags(ctx context.Context, tags []string, replay time.Time) error {
	if len(tags) == 0 {
		return nil
	}
	if s.closed.Load() {
		return wrap("invalidate", ErrClosed)
	}
	s.flushQueued(ctx)
	msg, err := s.message(Invalidation{Tags: tags})
	if err != nil {
		return wrap("invalidate", err)
	}
	err = s.invalidateOnce(ctx, tags, msg, replay)
	return wrap("invalidate", err)
}

// invalidateOnce is InvalidateTags' round trip: the raises, then the
// message. A Redis that does not know script flags gets the raises again
// without them, at once. go-redis sends the whole pipeline again once
// (clientOptions' MaxRetries) when the first raise's reply is NOREPLICAS
// or READONLY, so the peers get the message twice: the same bytes, whose
// second copy drops what the first did, and no epoch is raised twice
// (the first raise was refused; a raise never lowers one). Left so
// (TestRefusedRaiseResentAtMostOnce): the retry is for a pooled
// connection that died with a restarted Redis.
func (s *Store) invalidateOnce(ctx context.Context, tags []string, msg []byte, replay time.Time) error {
	now := strconv.FormatInt(s.epochNow().UnixMilli(), 10)
	cctx, cancel, sp, err := s.withBudget(ctx)
	defer cancel()
	if err != nil {
		return err // the caller replays it (ErrBudget)
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(tags))
	for i, t := range tags {
		cmds[i] = s.bump(cctx, pipe, s.epochKey(t), now)
	}
	pub := s.publishIn(cctx, pipe, s.channel(), msg)
	_, err = pipe.Exec(cctx)
	s.end(ctx, sp, err)
	if err == nil {
		err = pub.Err()
	}
	if err == nil {
		s.tookWrite() // refusing.go
	}
	if err != nil && s.noFlags(cmds) {
		return s.invalidateOnce(ctx, tags, msg, replay)
	}
	if err != nil {
		s.epochsRefused(ctx, cmds, replay)
	}
	return err
}

// globEscape quotes the characters SCAN MATCH treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (s *Store) message(inv Invalidation) ([]byte, error) {
	inv.Origin = s.origin
	db := s.opts.DB
	inv.DB = &db
	return json.Marshal(encodeWire(inv))
}

func (s *Store) publish(ctx context.Context, inv Invalidation) error {
	return s.publishOn(ctx, s.channel(), inv)
}

// subscribe listens on the channel until ctx ends. go-redis redials and
// resubscribes a PubSub whose connection failed, on the next receive; this
// loop adds what it does not do: a PING on a quiet connection, so a dead
// peer is noticed, a fresh PubSub when the PING goes unanswered, when the
// cluster drops the subscription (sunsubscribe: the slot moved) and when
// Redis refuses the subscription on a sound connection (MOVED to the
// slot's new owner), and a full invalidation after any gap, since
// messages sent meanwhile are lost.
func (s *Store) subscribe(ctx context.Context) {
	defer s.wg.Done()
	ps := s.subscribeAll(ctx)
	s.psMu.Lock()
	s.ps = ps
	s.psMu.Unlock()
	s.wg.Add(1)
	go func() {
		// Close interrupts a blocked receive by closing the connection.
		defer s.wg.Done()
		<-ctx.Done()
		s.psMu.Lock()
		_ = s.ps.Close()
		s.psMu.Unlock()
	}()

	gap := false // a message may have been missed since the last subscribe
	unanswered, failed := 0, 0
	for ctx.Err() == nil {
		if s.relayStalled() {
			s.log.Warn("own heartbeats stopped coming back through this read replica")
			s.subscribed.Store(false)
			gap, unanswered = true, 0
			if ps = s.resubscribe(ctx, ps, true); ps == nil {
				return
			}
			continue
		}
		msg, err := ps.ReceiveTimeout(ctx, idleCheck)
		if ctx.Err() != nil {
			return
		}
		var nerr net.Error
		switch {
		case err == nil:
			unanswered = 0
		case errors.As(err, &nerr) && nerr.Timeout() && unanswered < maxUnanswered:
			pctx, cancel := s.withTimeout(ctx)
			_ = ps.Ping(pctx) // a failed write makes go-redis reconnect
			cancel()
			unanswered++
			continue
		case errors.As(err, &nerr) && nerr.Timeout():
			// PINGs went unanswered: the connection is dead without
			// having been closed. Start over on a new one.
			s.log.Warn("invalidation subscription unresponsive, resubscribing")
			s.subscribed.Store(false)
			gap, unanswered = true, 0
			// On a read replica, the next one: this one may be stuck.
			if ps = s.resubscribe(ctx, ps, s.relayed()); ps == nil {
				return
			}
			continue
		default:
			s.subscribed.Store(false)
			if !gap {
				s.log.Warn("invalidation subscription lost", "err", err)
			}
			gap = true
			s.reloadSlots()
			select {
			case <-ctx.Done():
				return
			case <-time.After(retryDelay(failed, rand.Int64N)):
			}
			failed++
			var rerr redis.Error
			switch {
			case s.relayed() && failed%relayFailures == 0:
				// This read replica does not answer: try the next.
				if ps = s.resubscribe(ctx, ps, true); ps == nil {
					return
				}
			case errors.As(err, &rerr):
				// Redis refused the subscription (MOVED: the slot
				// has moved since the client last asked; CLUSTERDOWN;
				// LOADING). The connection is sound but subscribed
				// to nothing, and go-redis only redials a broken
				// one: start over, where the slot lives now.
				if ps = s.resubscribe(ctx, ps, false); ps == nil {
					return
				}
			}
			continue
		}

		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "sunsubscribe" && m.Count == 0 {
				// Cluster moved the slot (failover, resharding) and
				// dropped the shard subscription: start over.
				s.log.Warn("invalidation subscription dropped by the cluster, resubscribing")
				s.subscribed.Store(false)
				gap, unanswered = true, 0
				s.reloadSlots()
				if ps = s.resubscribe(ctx, ps, false); ps == nil {
					return
				}
				continue
			}
			if (m.Kind != "subscribe" && m.Kind != "ssubscribe") || m.Count < len(s.channels()) {
				continue // not every channel confirmed yet
			}
			s.restartFloor(ctx) // before any beat can prove what the floor refuses
			s.subscribed.Store(true)
			s.proof.ForgetAcked()
			failed = 0
			if gap {
				gap = false
				s.proof.Gap(time.Now())
				s.log.Info("invalidation channel resubscribed; older L1 entries now need to be younger than max_lag")
				s.deliver(Invalidation{All: true, Gap: true})
			}
		case *redis.Message:
			var inv Invalidation
			if err := json.Unmarshal([]byte(m.Payload), &inv); err != nil {
				s.log.Warn("ignoring malformed invalidation", "err", err)
				continue
			}
			inv = decodeWire(inv)
			if inv.DB != nil && *inv.DB != s.opts.DB {
				continue // another database's fleet (Invalidation.DB)
			}
			inv.DB = nil // the wire's alone
			switch {
			case inv.Lost:
				s.peerLost(inv.Origin)
			case inv.Beat != nil:
				if inv.Origin == s.origin && s.proof.Heard(inv.Beat.Seq, time.Unix(0, inv.Beat.Sent), time.Now()) {
					s.log.Warn("own heartbeats that Redis took never came back; older L1 entries now need to be younger than max_lag")
					s.deliver(Invalidation{All: true, Gap: true})
				}
			case inv.Origin != s.origin:
				s.deliver(inv)
			}
		}
	}
}

// resubscribe replaces the subscription with a new one, on the next read
// replica when moveRelay (relay.go).
func (s *Store) resubscribe(ctx context.Context, old *redis.PubSub, moveRelay bool) *redis.PubSub {
	s.psMu.Lock()
	defer s.psMu.Unlock()
	_ = old.Close()
	if ctx.Err() != nil {
		return nil
	}
	if moveRelay {
		s.nextRelay()
	}
	s.ps = s.subscribeAll(ctx)
	return s.ps
}

func (s *Store) deliver(inv Invalidation) {
	if s.opts.OnInvalidate != nil {
		s.opts.OnInvalidate(inv)
	}
}
