package l2

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxMessageKeys caps the keys carried in one message: a route-wide tag may
// name many thousands, and peers find them through their own tag index.
const maxMessageKeys = 1000

// Subscriber timing: a subscription quiet for idleCheck sends a PING to
// prove the connection alive, and is rebuilt after maxUnanswered PINGs in
// a row get no answer (a peer gone without closing the socket). A false
// alarm costs every L1 entry, hence the patience. retryEvery spaces
// resubscribe attempts while Redis is down.
const (
	idleCheck     = time.Second
	maxUnanswered = 3
	retryEvery    = 100 * time.Millisecond
)

// Invalidation is the message replicas exchange on the channel
// Prefix+"invalidate", as JSON: {"tags":[..],"keys":[..],"all":true,"origin":"…"}.
// Keys are cache keys as the proxy knows them (without prefix). Keys may be
// left out when there are more than 1000; Tags then say what to drop.
type Invalidation struct {
	Tags   []string `json:"tags,omitempty"`
	Keys   []string `json:"keys,omitempty"`
	All    bool     `json:"all,omitempty"`
	Origin string   `json:"origin"`
}

// InvalidateTags removes every entry carrying one of tags, and the tag sets,
// from L2, then tells the other replicas to drop them from their L1. It
// returns only once L2 is clean, so that a write answered to the client is
// never followed by a stale read; each of its round trips is bounded by
// Timeout. The caller drops its own L1 entries.
func (s *Store) InvalidateTags(ctx context.Context, tags ...string) error {
	if len(tags) == 0 {
		return nil
	}
	if err := s.admit(); err != nil {
		return wrap("invalidate", err)
	}
	s.flushQueued(ctx)

	cctx, cancel := s.withTimeout(ctx)
	pipe := s.rdb.Pipeline()
	members := make([]*redis.StringSliceCmd, len(tags))
	for i, t := range tags {
		members[i] = pipe.ZRange(cctx, s.tagKey(t), 0, -1)
	}
	_, err := pipe.Exec(cctx)
	cancel()
	s.done(ctx, err)
	if err != nil {
		return wrap("invalidate", err)
	}

	seen := make(map[string]bool)
	var keys []string
	for _, m := range members {
		for _, k := range m.Val() {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	del := append(prefixed(keys, s.entryKey), prefixed(tags, s.tagKey)...)
	err = s.unlink(ctx, s.rdb, del)

	// Publish even when the unlink failed: peers dropping their L1 copies
	// is still right, and the error goes back to the caller.
	if len(keys) > maxMessageKeys {
		keys = nil
	}
	perr := s.publish(ctx, Invalidation{Tags: tags, Keys: keys})
	return wrap("invalidate", errors.Join(err, perr))
}

// PurgeAll removes every key under Prefix on every master (SCAN + UNLINK)
// and tells the other replicas to empty their L1. With an empty Prefix it
// empties the whole database. Each round trip is bounded by Timeout; the
// whole purge only by ctx.
func (s *Store) PurgeAll(ctx context.Context) error {
	if err := s.admit(); err != nil {
		return wrap("purge", err)
	}
	s.flushQueued(ctx)

	match := globEscape(s.opts.Prefix) + "*"
	purge := func(ctx context.Context, c redis.UniversalClient) error {
		var cursor uint64
		for {
			cctx, cancel := s.withTimeout(ctx)
			keys, next, err := c.Scan(cctx, cursor, match, 1000).Result()
			cancel()
			s.done(ctx, err)
			if err != nil {
				return err
			}
			if err := s.unlink(ctx, c, keys); err != nil {
				return err
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}

	var err error
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return purge(ctx, c)
		})
	} else {
		err = purge(ctx, s.rdb)
	}
	perr := s.publish(ctx, Invalidation{All: true})
	return wrap("purge", errors.Join(err, perr))
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

func (s *Store) publish(ctx context.Context, inv Invalidation) error {
	inv.Origin = s.origin
	msg, err := json.Marshal(inv)
	if err != nil {
		return err
	}
	cctx, cancel := s.withTimeout(ctx)
	defer cancel()
	err = s.rdb.Publish(cctx, s.channel(), msg).Err()
	s.done(ctx, err)
	return err
}

// subscribe listens on the channel until ctx ends. go-redis redials and
// resubscribes a PubSub whose connection failed, on the next receive; this
// loop adds what it does not do: a PING on a quiet connection, so a dead
// peer is noticed, a fresh PubSub when the PING goes unanswered, and a
// full invalidation after any gap, since messages sent meanwhile are lost.
func (s *Store) subscribe(ctx context.Context) {
	defer s.wg.Done()
	ps := s.rdb.Subscribe(ctx, s.channel())
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
	unanswered := 0
	for ctx.Err() == nil {
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
			gap, unanswered = true, 0
			if ps = s.resubscribe(ctx, ps); ps == nil {
				return
			}
			continue
		default:
			if !gap {
				s.log.Warn("invalidation subscription lost", "err", err)
			}
			gap = true
			select {
			case <-ctx.Done():
				return
			case <-time.After(retryEvery):
			}
			continue
		}

		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && gap {
				gap = false
				s.log.Info("invalidation channel resubscribed; dropping L1")
				s.deliver(Invalidation{All: true})
			}
		case *redis.Message:
			var inv Invalidation
			if err := json.Unmarshal([]byte(m.Payload), &inv); err != nil {
				s.log.Warn("ignoring malformed invalidation", "err", err)
				continue
			}
			if inv.Origin != s.origin {
				s.deliver(inv)
			}
		}
	}
}

func (s *Store) resubscribe(ctx context.Context, old *redis.PubSub) *redis.PubSub {
	s.psMu.Lock()
	defer s.psMu.Unlock()
	_ = old.Close()
	if ctx.Err() != nil {
		return nil
	}
	s.ps = s.rdb.Subscribe(ctx, s.channel())
	return s.ps
}

func (s *Store) deliver(inv Invalidation) {
	if s.opts.OnInvalidate != nil {
		s.opts.OnInvalidate(inv)
	}
}
