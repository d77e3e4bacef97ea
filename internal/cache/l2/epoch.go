package l2

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache"
)

// Tag epochs: invalidation must not depend on a key Redis may evict.
//
// Under maxmemory with allkeys-lru, Redis evicts the keys used least
// recently, and a tag index (a set of the keys carrying a tag) is read only
// when the tag is invalidated, while its entries are read on every hit. So
// the index goes first, and an invalidation that looks entries up through
// it finds nothing and leaves them to be served for the rest of their TTL.
//
// Instead each tag has an epoch key, P v:<tag>, holding the time (unix ms)
// of its last invalidation, and each stored value starts with a header
// naming the time its upstream request left and its tags. A read returns
// the entry only if every one of its tags has an epoch key and the entry's
// request left after that epoch; both are checked in the script that reads
// the entry, in the same round trip. Storing an entry creates its tags'
// epoch keys (never at a value an older entry may pass: touchScript) and
// stretches their expiry to cover it, so an epoch key that is missing
// while an entry names it was evicted (or never stored): the entry is then
// a miss, which costs a refetch, never a stale answer, and so is every
// entry stored before the key came back.
const (
	headerMagic = "sc2 "
	// epochFloor is how long an invalidation's epoch key lives at least: a
	// fetch that began before the invalidation and stores its answer after
	// it must still find the epoch to be refused.
	epochFloor = 10 * time.Minute
)

// readScript returns the value at KEYS[1] if its header's tags are all
// current (see above), else false; a value without a header is returned as
// it is, for the client to find undecodable and delete. ARGV[1] is the epoch key prefix. It
// reads keys it was not given in KEYS, which Redis allows outside Cluster;
// Cluster mode checks in two round trips instead (getChecked).
const readScript = `
local v = redis.call('GET', KEYS[1])
if not v then return false end
local hend = string.find(v, '\n\n', 1, true)
if string.sub(v, 1, 4) ~= 'sc2 ' or not hend then return v end
local at = nil
for line in string.gmatch(string.sub(v, 5, hend), '([^\n]*)\n') do
  if not at then
    at = tonumber(line)
  else
    local ep = redis.call('GET', ARGV[1] .. line)
    if not ep or tonumber(ep) >= at then return false end
  end
end
return v`

// touchScript makes sure an epoch key exists and lives at least ARGV[1] ms.
// ARGV[2] is when the request of the entry being stored left (unix ms).
//
// A missing key must not come back at a value an entry may have recorded:
// a tag's key raised by a write and then evicted, recreated at 0 by the
// next fill, would make every entry fetched before that write current
// again, for as long as it lives. So once Redis has evicted a key (INFO
// stats evicted_keys > 0 on the node holding this one: an eviction may
// have taken it) a missing key comes back at Redis's clock (or the storing
// entry's request, if later), at or after any raise it may have lost:
// every entry stored before now is a miss, the storing one and other
// fills in flight across that raise included. That costs the first fill
// of a new tag on an evicting Redis (the next one is kept), never a stale
// answer. A Redis that never evicted lost the key some other way: never
// stored, or expired after the entries naming it (its lifetime covers
// theirs); it comes back at 0, so concurrent first fills of a new tag all
// count. INFO runs only when the key is missing, never on a read. A key
// deleted by hand (DEL, FLUSHALL of some keys) is not covered; a Redis
// restart is (restart.go).
const touchScript = `
if redis.call('EXISTS', KEYS[1]) == 0 then
  local ep = 0
  local ev = string.match(redis.call('INFO', 'stats'), 'evicted_keys:(%d+)')
  if ev and tonumber(ev) > 0 then
    local t = redis.call('TIME')
    ep = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    if tonumber(ARGV[2]) > ep then ep = tonumber(ARGV[2]) end
  end
  redis.call('SET', KEYS[1], string.format('%.0f', ep), 'PX', ARGV[1])
  return 1
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return 0`

// bumpScript raises an epoch key to ARGV[1] (never lowers it) and makes it
// live at least ARGV[2] ms. Epochs and entries' stamps are on Redis's
// clock as each replica's heartbeat measures it, rounded the way that
// refuses more (skew.go); a replica off by more than max_lag/4 stores
// nothing.
//
// It runs with the allow-oom flag (Redis 7 script flags): a Redis over
// maxmemory under noeviction refuses every command that may grow memory,
// the SET of a plain script among them, while it still serves reads and
// PUBLISHes. A raise it refused left the entry it invalidates readable
// from L2 for the rest of its TTL, on every replica (the write's answer
// and its peers' L1 drops went out all the same). The raise is the
// invalidation itself and costs a few bytes, mostly none (the key exists
// and keeps its length); stores stay refused, so the memory limit still
// holds for what it is for. Redis before 7 does not know the flag line
// (a compile error): the store then sends the plain script (legacyBump),
// and a raise refused there is handled as any other (epochsRefused).
const bumpScript = `
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > cur then
  redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1`

// bumpFlagged is bumpScript as Redis 7 and later run it over maxmemory.
const bumpFlagged = "#!lua flags=allow-oom\n" + bumpScript

var (
	readRedis = redis.NewScript(readScript)
	errNoTags = errors.New("tag with a newline")
)

// bump queues the raise of epoch key ek to now (unix ms) on pipe.
func (s *Store) bump(ctx context.Context, pipe redis.Pipeliner, ek, now string) *redis.Cmd {
	src := bumpFlagged
	if s.legacyBump.Load() {
		src = bumpScript
	}
	return pipe.Eval(ctx, src, []string{ek}, now, epochFloor.Milliseconds())
}

// noFlags reports whether one of cmds failed because Redis does not know
// script flags (before 7.0: the shebang line does not compile); the store
// then sends bumpScript without them from now on, and reports true.
func (s *Store) noFlags(cmds []*redis.Cmd) bool {
	if s.legacyBump.Load() {
		return false
	}
	for _, c := range cmds {
		if err := c.Err(); err != nil && strings.Contains(err.Error(), "Error compiling script") {
			s.legacyBump.Store(true)
			s.log.Info("redis does not know script flags (before 7.0): epoch raises are refused while it is over maxmemory")
			return true
		}
	}
	return false
}

func (s *Store) epochKey(tag string) string { return s.key("v:", tag) }

// encodeValue is what L2 stores for e: the header the read script checks,
// its stamp at (e's StoredAt on Redis's clock: skew.go's redisStamp), then
// the codec's bytes.
func encodeValue(e *cache.Entry, at time.Time) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(headerMagic)
	b.WriteString(strconv.FormatInt(at.UnixMilli(), 10))
	b.WriteByte('\n')
	for _, t := range e.Tags {
		if t == "" || strings.ContainsAny(t, "\n") {
			return nil, errNoTags
		}
		b.WriteString(t)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.Write(cache.Marshal(e))
	return b.Bytes(), nil
}

// header parses encodeValue's header without allocating: when the
// entry's request left (unix ms), its tag lines (each ending in '\n'), and
// the codec's bytes.
func header(b []byte) (at int64, tagLines, payload []byte, ok bool) {
	if !bytes.HasPrefix(b, []byte(headerMagic)) {
		return 0, nil, nil, false
	}
	end := bytes.Index(b, []byte("\n\n"))
	if end < 0 {
		return 0, nil, nil, false
	}
	nl := len(headerMagic) + bytes.IndexByte(b[len(headerMagic):], '\n')
	at, err := strconv.ParseInt(string(b[len(headerMagic):nl]), 10, 64)
	if err != nil {
		return 0, nil, nil, false
	}
	return at, b[nl+1 : end+1], b[end+2:], true
}

// splitValue parses encodeValue's header: when the entry's request left
// (unix ms), its tags, and the codec's bytes.
func splitValue(b []byte) (at int64, tags []string, payload []byte, ok bool) {
	at, lines, payload, ok := header(b)
	if !ok {
		return 0, nil, nil, false
	}
	if len(lines) > 0 {
		tags = strings.Split(string(lines[:len(lines)-1]), "\n")
	}
	return at, tags, payload, true
}

// isCluster reports whether scripts must name every key they touch.
func (s *Store) isCluster() bool {
	_, ok := s.rdb.(*redis.ClusterClient)
	return ok
}

// getChecked reads one entry and checks its epochs: in one round trip (the
// read script) outside Cluster, in two in Cluster, where the epoch keys
// live in other slots than the entry. A nil value is a miss.
func (s *Store) getChecked(ctx context.Context, key string) ([]byte, error) {
	if !s.isCluster() {
		return s.getGuessed(ctx, key)
	}
	if eks, ok := s.guesses.Get(key); ok {
		b, v, err := s.getGuessedCluster(ctx, key, eks)
		if err != nil || v != verdictUnknown {
			return b, err
		}
	}
	b, err := s.rdb.Get(ctx, s.entryKey(key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s.learnHeader(key, b)
	vals, err := s.epochsOf(ctx, [][]byte{b})
	if err != nil {
		return nil, err
	}
	return vals[0], nil
}

// epochsOf checks values read with plain GETs (Cluster) against their tags'
// epochs in one more pipeline, and returns them with the invalidated ones
// set to nil.
func (s *Store) epochsOf(ctx context.Context, vals [][]byte) ([][]byte, error) {
	pipe := s.rdb.Pipeline()
	type check struct {
		at   int64
		cmds []*redis.StringCmd
	}
	checks := make([]check, len(vals))
	for i, v := range vals {
		if v == nil {
			continue
		}
		at, tags, _, ok := splitValue(v)
		if !ok {
			continue // the caller finds it undecodable
		}
		checks[i].at = at
		for _, t := range tags {
			checks[i].cmds = append(checks[i].cmds, pipe.Get(ctx, s.epochKey(t)))
		}
	}
	if pipe.Len() > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
	}
	for i, c := range checks {
		for _, cmd := range c.cmds {
			ep, err := cmd.Int64()
			if err != nil || ep >= c.at {
				vals[i] = nil
				break
			}
		}
	}
	return vals, nil
}

// storedAt is the request time (unix ms) in an encoded value's header,
// the least touchScript recreates an evicted epoch key at.
func storedAt(val []byte) int64 {
	at, _, _, _ := header(val)
	return at
}
