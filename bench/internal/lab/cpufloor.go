package lab

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/sidecache/sidecache/bench/internal/load"
)

// userGet is GET /users/{id}.
func userGet(id int64) load.Request {
	return load.Request{Method: "GET", Path: "/users/" + strconv.FormatInt(id, 10)}
}

// idLog is the ids one cell asked, in order, for a later cell of the same
// round to ask again. Safe for concurrent use (vegeta's targeter).
type idLog struct {
	mu   sync.Mutex
	ids  []int64
	next int // the next id replay or cycle gives
}

// reset forgets the ids, before the recording cell.
func (g *idLog) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ids, g.next = g.ids[:0], 0
}

// rewind starts the replay again from the first id, before a replaying cell.
func (g *idLog) rewind() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.next = 0
}

// add records id and returns it.
func (g *idLog) add(id int64) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ids = append(g.ids, id)
	return id
}

// replay is the next recorded id; false once all were given.
func (g *idLog) replay() (int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.next >= len(g.ids) {
		return 0, false
	}
	g.next++
	return g.ids[g.next-1], true
}

// cycle is replay that starts over after the last id; false when none
// was recorded.
func (g *idLog) cycle() (int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.ids) == 0 {
		return 0, false
	}
	g.next++
	return g.ids[(g.next-1)%len(g.ids)], true
}

// batchFloor is the batch row's Go reference: the bare Go server at
// GOMAXPROCS=1 in its batching mode (bareBatch), one process for two
// cells of each round. Its batched miss asks, in order, the ids the first
// sidecar's batched miss asked in the same round (asked; fresh ones from
// cold if it asks more), at the same rate, its store emptied before each
// round as that sidecar's L1 is purged, the demo's bulk calls counted the
// same way. Its hit asks the same ids again, from memory. The miss ÷ the
// hit is the floor of the batched miss ÷ hit goal: what batching alone
// costs a Go server over serving from memory.
//
// A second process, the same server with sidecache's splitter
// (-batch-lean), asks the same ids for a third cell; its miss is read
// against the first's hit (the two serve from memory alike).
func (l *Lab) batchFloor(ctx context.Context, asked *idLog, cold *coldIDs) []cpuEntry {
	var once, leanOnce sync.Once
	var shared, lean *sut
	var startErr, leanErr error
	start := func() (*sut, error) {
		once.Do(func() { shared, startErr = l.startBareBatch(ctx, false) })
		return shared, startErr
	}
	startLean := func() (*sut, error) {
		leanOnce.Do(func() { lean, leanErr = l.startBareBatch(ctx, true) })
		return lean, leanErr
	}
	fetched := &idLog{}
	var replayed, fresh, missed atomic.Int64 // the last cell's ids by source, and the hit cell's not fetched
	var leanReplayed, leanFresh atomic.Int64
	return []cpuEntry{
		{row: "batch", test: "batched miss", server: BareBatchServer, start: start, bulk: true, ids: 1,
			prep: func(s *sut) error {
				asked.rewind()
				fetched.reset()
				replayed.Store(0)
				fresh.Store(0)
				return s.purge(ctx)
			},
			next: func() load.Request {
				id, ok := asked.replay()
				if ok {
					replayed.Add(1)
				} else {
					id = cold.take()
					fresh.Add(1)
				}
				return userGet(fetched.add(id))
			},
			note: func() string {
				return fmt.Sprintf("batching as the cache+batch sidecar (max_size %d, max_wait %v, %d bulk calls in flight at most, the window held open while one is), "+
					"each answer split by encoding/json's Decoder into json.RawMessage elements stored in a map with sidecache's ETag (bulk.ETag, BLAKE2b); "+
					"its store emptied before each round; the last round asked %d of the ids sidecache (batched miss) asked in that round, in its order, and %d fresh",
					batchMaxSize, batchMaxWait, batchMaxInFlight, replayed.Load(), fresh.Load())
			}},
		{row: "batch", test: "hit", server: BareBatchHitServer, start: start, ids: 1,
			prep: func(*sut) error { fetched.rewind(); missed.Store(0); return nil },
			next: func() load.Request {
				id, ok := fetched.cycle()
				if !ok {
					id = cold.take()
					missed.Add(1)
				}
				return userGet(id)
			},
			note: func() string {
				return fmt.Sprintf("the ids its batched miss fetched in the same round, asked again in the same order (from the first again if it asks more) "+
					"and answered from its map, headers as the miss's; %d asked in the last round were none it had fetched", missed.Load())
			}},
		{row: "batch", test: "batched miss", server: BareBatchLeanServer, start: startLean, bulk: true, ids: 1,
			prep: func(s *sut) error {
				asked.rewind()
				leanReplayed.Store(0)
				leanFresh.Store(0)
				return s.purge(ctx)
			},
			next: func() load.Request {
				id, ok := asked.replay()
				if ok {
					leanReplayed.Add(1)
				} else {
					id = cold.take()
					leanFresh.Add(1)
				}
				return userGet(id)
			},
			note: func() string {
				return fmt.Sprintf("the batched miss above with sidecache's splitter (bulk.SplitFor over the whole answer, each element its own copy) in place of encoding/json; "+
					"the last round asked %d of the ids sidecache (batched miss) asked in that round, in its order, and %d fresh",
					leanReplayed.Load(), leanFresh.Load())
			}},
	}
}
