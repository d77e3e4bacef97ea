// Package guess is a bounded table of guesses: for a key, the epoch keys
// of the tags it was last seen with.
//
// The L2 store reads an entry and its tags' epochs in one MGET
// (internal/cache/l2, fastread.go) instead of its read script, but the MGET
// must name the epoch keys before the entry's header, which lists its
// tags, has been read. The table is where the store remembers them. A
// guess only chooses which epoch keys are read; the header decides which
// must have been, so a wrong, missing or dropped guess costs the store a
// round trip (the script), never a stale answer. That is why the table may
// drop guesses freely to stay bounded, and key a guess by a hash of the
// key, not the key.
package guess

import (
	"hash/maphash"
	"sync"
)

// Bounds of the table. The keys come from requests and the tags from
// routes, paths (the URI tag) and upstream answers, so an attacker can
// fill it: it holds at most Slots guesses and Bytes of epoch keys (plus
// the maps' own overhead, about 1 MiB when full).
const (
	shards = 16
	Slots  = 1 << 14
	Bytes  = 4 << 20
)

// Table maps a key's hash to the epoch keys of the tags it was last seen
// with. A collision of two keys' hashes only makes one guess wrong.
type Table struct {
	seed   maphash.Seed
	shards [shards]shard
}

type shard struct {
	mu    sync.RWMutex
	m     map[uint64][]string // epoch keys, prefixed; never modified once stored
	bytes int                 // cost of what m holds
}

// New returns an empty table.
func New() *Table {
	g := &Table{seed: maphash.MakeSeed()}
	for i := range g.shards {
		g.shards[i].m = make(map[uint64][]string)
	}
	return g
}

// cost is what a guess is charged against Bytes: its strings and
// their headers.
func cost(eks []string) int {
	n := 24 + 16*len(eks)
	for _, k := range eks {
		n += len(k)
	}
	return n
}

func (g *Table) shard(key string) (*shard, uint64) {
	h := maphash.String(g.seed, key)
	return &g.shards[h%shards], h
}

// Get returns the epoch keys guessed for key; ok is false if there is no
// guess (a key without tags has an empty one). eks is not to be modified.
func (g *Table) Get(key string) (eks []string, ok bool) {
	sh, h := g.shard(key)
	sh.mu.RLock()
	eks, ok = sh.m[h]
	sh.mu.RUnlock()
	return eks, ok
}

// Put records eks as key's guess; the table keeps eks, which is not to be
// modified after. A full shard drops guesses first,
// arbitrary ones (map iteration order), which is enough to bound it: a
// dropped guess costs one script read.
func (g *Table) Put(key string, eks []string) {
	c := cost(eks)
	sh, h := g.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old, ok := sh.m[h]; ok {
		delete(sh.m, h)
		sh.bytes -= cost(old)
	}
	for k, old := range sh.m {
		if len(sh.m) < Slots/shards && sh.bytes+c <= Bytes/shards {
			break
		}
		delete(sh.m, k)
		sh.bytes -= cost(old)
	}
	sh.m[h] = eks
	sh.bytes += c
}

// Size is the number of guesses held and their cost (against Bytes).
func (g *Table) Size() (n, bytes int) {
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.RLock()
		n += len(sh.m)
		bytes += sh.bytes
		sh.mu.RUnlock()
	}
	return n, bytes
}
