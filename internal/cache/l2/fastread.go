package l2

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache/l2/mget"
)

// Reading an entry without the script.
//
// readScript (epoch.go) checks an entry against its tags' epochs where the
// entry is, in one round trip, but Redis pays for it: the script call, a
// GET from Lua per tag, and the header parsed in Lua cost about 1.4× a
// plain GET of the same value (docs/coherence.md, "The L2 read"). One MGET
// of the entry key and its tags' epoch keys costs what a GET costs — one
// command, one reply — and proves the same thing: Redis runs a command at
// once, so the epochs are read at the instant the entry is, as in the
// script. What the MGET needs and the script does not is the tags, before
// the header naming them has been read. So the store remembers, per key,
// the tags it last saw in the key's header or stored with it (a guess),
// reads MGET e:<key> v:<guessed tag>…, and serves the entry only if
//
//   - every tag its header names was among the guessed ones, and
//   - each of those epoch keys exists and is older than the entry's
//     request, exactly the script's test.
//
// The guess only chooses which epoch keys are read; the header, written
// with the entry, decides which must have been. A header naming a tag that
// was not guessed (another replica stored the key with other tags, or the
// guess was lost to a collision or to the table's bound) sends the read to
// the script, whose answer teaches the store the header's tags. So a wrong,
// missing or forged guess costs a round trip, never a stale answer, and
// the guarantees of epoch.go (an invalidated entry is a miss from the
// moment its epoch was raised; an entry whose epoch key was evicted is a
// miss) hold for this read as they do for the script. In Cluster, where
// the epoch keys live in other slots, the same test runs on one pipeline of
// GETs (getGuessedCluster) instead of getChecked's two round trips.

// maxGuessTags and maxGuessBytes bound what learn records: a key with more
// tags than maxGuessTags, or more than maxGuessBytes of them, is always
// read by the script (the table's own bounds: internal/cache/l2/guess).
const (
	maxGuessTags  = 16
	maxGuessBytes = 2 << 10
)

// learn records tags as key's guess, if they are within the bounds.
func (s *Store) learn(key string, tags []string) {
	if len(tags) > maxGuessTags {
		return
	}
	n := 0
	for _, t := range tags {
		n += len(t)
	}
	if n > maxGuessBytes {
		return
	}
	eks := make([]string, len(tags))
	for i, t := range tags {
		eks[i] = s.epochKey(t)
	}
	s.guesses.Put(key, eks)
}

// learnHeader records the tags named by the header of b, a stored value.
func (s *Store) learnHeader(key string, b []byte) {
	if _, tags, _, ok := splitValue(b); ok {
		s.learn(key, tags)
	}
}

// verdict is what checkGuessed found.
type verdict uint8

const (
	verdictServe    verdict = iota // every tag checked and current
	verdictRefuse                  // a tag invalidated since the request, or its epoch gone
	verdictUnknown                 // a tag that was not guessed: ask the script
	verdictNoHeader                // not a value encodeValue wrote: the caller's decode drops it
)

// checkGuessed applies the script's test to b, an entry read in the same
// MGET as eps, the values of the epoch keys eks (nil: the key is missing),
// and returns the codec's bytes after b's header when it serves b (decode
// then need not parse the header again). It does not allocate.
func (s *Store) checkGuessed(b []byte, eks []string, eps [][]byte) (verdict, []byte) {
	at, lines, payload, ok := header(b)
	if !ok {
		return verdictNoHeader, nil
	}
	pfx := len(s.opts.Prefix) + len("v:") // epochKey's prefix, not built for its length
	for len(lines) > 0 {
		i := bytes.IndexByte(lines, '\n')
		tag := lines[:i]
		lines = lines[i+1:]
		j := 0
		for j < len(eks) && eks[j][pfx:] != string(tag) {
			j++
		}
		if j == len(eks) {
			return verdictUnknown, nil
		}
		if eps[j] == nil {
			return verdictRefuse, nil // evicted, expired or never stored
		}
		n, err := strconv.ParseInt(string(eps[j]), 10, 64)
		if err != nil || n >= at {
			return verdictRefuse, nil
		}
	}
	return verdictServe, payload
}

// getLean is the guessed read (getGuessed) on the lean client (mget),
// with the deadline dl instead of a context of its own: no timer, no
// context allocated for a hit. done is false when there is no lean client
// (Cluster, Sentinel), no guess for key, or a header named a tag that was
// not guessed: the caller reads with getChecked then, by the same dl.
// payload, when not nil, is b's codec bytes (judge). start is when the
// read began (dl less the timeout).
func (s *Store) getLean(ctx context.Context, key string, start, dl time.Time) (b, payload []byte, done bool, err error) {
	if s.lean == nil {
		return nil, nil, false, nil
	}
	eks, ok := s.guesses.Get(key)
	if !ok {
		return nil, nil, false, nil
	}
	var v verdict
	err = s.lean.MGet(ctx, start, dl, [3]string{s.opts.Prefix, "e:", key}, eks, func(vals [][]byte) { b, payload, v = s.judge(vals, eks) })
	if errors.Is(err, mget.ErrClosed) {
		err = ErrClosed // the store's, as before the pool had its own
	}
	if err != nil {
		return nil, nil, true, err
	}
	return b, payload, v != verdictUnknown, nil
}

// getGuessed is getChecked outside Cluster: one MGET when the key's tags
// are guessed, else (or when the guess fell short) the script, which
// teaches the guess. With a lean client the MGET was getLean's, before.
func (s *Store) getGuessed(ctx context.Context, key string) ([]byte, error) {
	if eks, ok := s.guesses.Get(key); ok && s.lean == nil {
		args := make([]string, 1+len(eks))
		args[0] = s.entryKey(key)
		copy(args[1:], eks)
		vals, err := s.rdb.MGet(ctx, args...).Result()
		if err != nil {
			return nil, err
		}
		if b, _, v := s.judge(stringsOf(vals), eks); v != verdictUnknown {
			return b, nil
		}
	}
	return s.getScripted(ctx, key)
}

// stringsOf turns go-redis's MGET answer into judge's form: nil for a
// missing key (or any reply that is not a string).
func stringsOf(vals []any) [][]byte {
	out := make([][]byte, len(vals))
	for i, v := range vals {
		if s, ok := v.(string); ok {
			out[i] = []byte(s)
		}
	}
	return out
}

// judge turns an MGET's answer (nil: a missing key) into the value to
// return (nil: a miss), its codec bytes when it is served (nil for a value
// without a header) and the verdict; verdictUnknown returns nil and asks
// for the script. The value returned is vals[0].
func (s *Store) judge(vals [][]byte, eks []string) (b, payload []byte, v verdict) {
	if len(vals) != 1+len(eks) {
		return nil, nil, verdictUnknown
	}
	b = vals[0]
	if b == nil {
		return nil, nil, verdictRefuse // no such entry
	}
	switch v, payload = s.checkGuessed(b, eks, vals[1:]); v {
	case verdictServe, verdictNoHeader:
		return b, payload, v
	default:
		return nil, nil, v
	}
}

// getGuessedCluster is getGuessed in Cluster, where the epoch keys live in
// other slots than the entry and one MGET cannot name them all: the GET of
// the entry and of each guessed epoch key go in one pipeline, which
// go-redis runs on their nodes in parallel — one round trip where the
// unguessed read makes two. It is not atomic, and need not be: an epoch
// raised before the read began is seen whichever of the GETs runs first,
// and one raised meanwhile belongs to a write that had not answered when
// the read began. Its error is the first failure other than a missing key.
func (s *Store) getGuessedCluster(ctx context.Context, key string, eks []string) ([]byte, verdict, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, 1+len(eks))
	cmds[0] = pipe.Get(ctx, s.entryKey(key))
	for i, k := range eks {
		cmds[1+i] = pipe.Get(ctx, k)
	}
	_, _ = pipe.Exec(ctx)
	vals := make([][]byte, len(cmds))
	for i, c := range cmds {
		v, err := c.Bytes()
		switch {
		case err == nil:
			vals[i] = v
		case !errors.Is(err, redis.Nil):
			return nil, verdictRefuse, err
		}
	}
	b, _, v := s.judge(vals, eks)
	return b, v, nil
}

// getScripted reads key with readScript and learns its header's tags.
func (s *Store) getScripted(ctx context.Context, key string) ([]byte, error) {
	t, err := readRedis.Run(ctx, s.rdb, []string{s.entryKey(key)}, s.key("v:", "")).Text()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	b := []byte(t)
	s.learnHeader(key, b)
	return b, nil
}
