package l2

import (
	"hash/fnv"

	"github.com/redis/go-redis/v9"
)

// The relay tier (Options.SubscribeAddrs). One Redis delivers every
// message to every subscriber, one write(2) per subscriber per message: at
// 1,000 replicas that fan-out, not the PUBLISH commands, is most of its
// coherence CPU (docs/coherence.md). Outside Cluster mode a master
// propagates every PUBLISH to its read replicas through the replication
// stream (Redis pubsub.c: forceCommandPropagation(c, PROPAGATE_REPL)), in
// the order it ran it among everything else, and each read replica
// delivers it to its own subscribers in that order. So a subscription on
// a read replica, with every beat and invalidation still PUBLISHed on the
// master, keeps the proof (heartbeat.go): when this replica's own beat
// comes back through the read replica, every invalidation the master ran
// before the beat has been delivered on the same connection before it. A
// read replica that lags delays the beat as much as the invalidations; one
// cut from its master stops delivering both, and the proof stalls (until
// the replica moves on: relayStall). One that resynchronised in full (its
// backlog could not cover a long cut) skipped part of the stream without
// closing its subscribers' connections: proof.Tracker.Heard notices that
// from this replica's own beats that the master acknowledged but that
// never came back, and sets the floor as a rebuilt subscription does. The master
// then runs one PUBLISH per message and sends the stream once per read
// replica; each read replica delivers to its share of the fleet.
//
// Cluster mode is refused: there a PUBLISH reaches other nodes, replicas
// included, over the cluster bus, which has no backlog and no order with
// anything published elsewhere.

// relayFailures is how many failed subscription attempts in a row move a
// replica to the next read replica in SubscribeAddrs.
const relayFailures = 3

// relayStall is how many of this replica's beats the master acknowledged
// may fail to come back through its read replica (4·MaxLag of beats)
// before it moves to the next one: that read replica is cut from the
// master or far behind it. Patient, since a move costs a gap (the floor)
// and, when the master itself is slow, every read replica lags alike.
const relayStall = 16

// firstRelay is where a replica's subscription starts: a hash of its
// origin, so a fleet spreads evenly over the n read replicas and each
// replica keeps its choice for its lifetime (-1 when n is 0: the master).
func firstRelay(origin string, n int) int {
	if n == 0 {
		return -1
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(origin))
	return int(h.Sum32() % uint32(n))
}

// relayed reports whether the subscription sits on a read replica.
func (s *Store) relayed() bool { return s.relay >= 0 }

// newSub is the subscription's client: on the master (Options.Addrs,
// Sentinel or Cluster as configured) or on read replica s.relay.
func (s *Store) newSub() redis.UniversalClient {
	o := subOptions(s.opts)
	if s.relayed() {
		o.Addrs, o.MasterName, o.IsClusterMode = []string{s.opts.SubscribeAddrs[s.relay]}, "", false
	}
	return redis.NewUniversalClient(o)
}

// relayStalled reports whether the subscription should leave its read
// replica although the connection works: its own beats, taken by the
// master, stopped coming back (relayStall). Only with another to go to.
func (s *Store) relayStalled() bool {
	return s.relayed() && len(s.opts.SubscribeAddrs) > 1 && s.subscribed.Load() && s.proof.Unheard() >= relayStall
}

// nextRelay moves the subscription's client to the next read replica in
// SubscribeAddrs. The caller holds psMu and resubscribes.
func (s *Store) nextRelay() {
	_ = s.sub.Close()
	s.relay = (s.relay + 1) % len(s.opts.SubscribeAddrs)
	s.sub = s.newSub()
	s.log.Warn("subscription moves to the next read replica", "addr", s.opts.SubscribeAddrs[s.relay])
}
