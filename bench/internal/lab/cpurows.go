package lab

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sidecache/sidecache/bench/internal/load"
	"github.com/sidecache/sidecache/bench/internal/resp"
)

// ColdUsers is the demo's user count when the batch or split rows run:
// their misses take ids in turn from keys+1 on, so none repeats within a
// run at any rate the CPU table uses (the demo computes a record from its
// id, so a large table costs it nothing).
const ColdUsers = 10_000_000

// BoundTest is the path of the batched miss with L1 at its bound, the
// batch row's steady state: the report finds it by this name.
const BoundTest = "batched miss, L1 at its bound"

// coldIDs hands out user ids past the warm keys, each once (wrapping
// after ColdUsers).
type coldIDs struct {
	first, span int64
	next        atomic.Int64
}

func newColdIDs(keys int) *coldIDs {
	return &coldIDs{first: int64(keys) + 1, span: int64(ColdUsers - keys)}
}

func (c *coldIDs) take() int64 { return c.first + (c.next.Add(1)-1)%c.span }

// splitPath is a bulk read of n ids: the first half drawn from the warm
// keys 1..keys (cached before each round), the rest cold.
func splitPath(n, keys int, cold *coldIDs) string {
	var b strings.Builder
	b.WriteString("/users?ids=")
	seen := make(map[int]bool, n/2)
	for len(seen) < min(n/2, keys) {
		if id := 1 + rand.IntN(keys); !seen[id] {
			if len(seen) > 0 {
				b.WriteByte(',')
			}
			seen[id] = true
			b.WriteString(strconv.Itoa(id))
		}
	}
	for i := len(seen); i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(cold.take(), 10))
	}
	return b.String()
}

// cpuRowEntries are the rows only sidecache has, for each sidecar:
//   - batch: GET /users/{id} on ids never asked before, batching on, L1
//     only (purged before each round), with requests per bulk call; and
//     the same on a sidecar whose L1 (BoundL1) is full and evicting
//     before each round (BoundTest); and beside them the bare Go server
//     at GOMAXPROCS=1 batching the ids the first sidecar asked, then
//     serving them from memory (batchFloor);
//   - split: GET /users?ids=… of Bulk ids, half of them cached before each
//     round, half cold;
//   - l2: a replica with L1 off reading entries another replica (L1 off
//     too) stored, with Redis's CPU; beside it the bare Go server at
//     GOMAXPROCS=1 reading each body from the same Redis with one GET (and
//     from memory, when the hit row does not run), the floor of the L2
//     hit's extra over the L1 hit; and a plain GET of a value of
//     the L2 entries' mean size at the same rate from a RESP loop, each
//     GET at its own instant as vegeta paces requests (the reference) and
//     in 1 ms batches (the earlier reference), and redis-benchmark's GET
//     (closed loop) when installed.
func (l *Lab) cpuRowEntries(ctx context.Context, cp CPUParams, sidecars []CPUSidecar) ([]cpuEntry, error) {
	var out []cpuEntry
	cold := newColdIDs(l.p.Keys)
	purge := func(s *sut) error { return s.purge(ctx) }
	coldGet := func() load.Request { return userGet(cold.take()) }
	// The ids the first sidecar's batched miss asked in its latest cell,
	// which the bare Go floor asks in the same round (batchFloor).
	asked := &idLog{}
	if cp.row("batch") || cp.row("split") {
		for i, sc := range sidecars {
			// One process serves both rows: each round's preparation
			// empties its L1.
			var once sync.Once
			var shared *sut
			var startErr error
			start := func() (*sut, error) {
				once.Do(func() { shared, startErr = l.startSidecarBin(ctx, sc, "cache+batch", l.demoAddr, "") })
				return shared, startErr
			}
			if cp.row("batch") {
				e := cpuEntry{row: "batch", test: "batched miss", server: sc.Name + " (batched miss)",
					start: start, prep: purge, bulk: true, ids: 1,
					next: coldGet, sidecar: i + 1}
				if i == 0 {
					e.prep = func(s *sut) error { asked.reset(); return s.purge(ctx) }
					e.next = func() load.Request { return userGet(asked.add(cold.take())) }
				}
				out = append(out, e)
				// The same load on a sidecar of its own whose L1 is full
				// and evicting before each round (boundRow).
				b := &boundRow{ctx: ctx, cold: cold, max: BoundL1Bytes}
				out = append(out, cpuEntry{row: "batch", test: BoundTest, server: sc.Name + " (" + BoundTest + ")",
					start: func() (*sut, error) { return l.startSidecarBin(ctx, sc, "cache+batch-bound", l.demoAddr, "") },
					prep:  b.prep, after: b.after, note: b.note, bulk: true, ids: 1,
					next: coldGet, sidecar: i + 1})
			}
			if cp.row("split") {
				out = append(out, cpuEntry{row: "split", test: "split", server: sc.Name + " (split)",
					start: start, rate: cp.SplitRate, bulk: true, ids: l.p.Bulk, sidecar: i + 1,
					prep: func(s *sut) error {
						if err := s.purge(ctx); err != nil {
							return err
						}
						return prefill(ctx, s.addr, "/users/", l.p.Keys)
					},
					next: func() load.Request {
						return load.Request{Method: "GET", Path: splitPath(l.p.Bulk, l.p.Keys, cold)}
					}})
			}
		}
	}
	if cp.row("batch") {
		out = append(out, l.batchFloor(ctx, asked, cold)...)
	}
	if !cp.row("l2") {
		return out, nil
	}
	if l.redisAddr == "" {
		if err := l.startRedis(ctx); err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
	}
	redis := l.redisAddr
	var writer *sut
	fillL2 := func(*sut) error {
		if writer == nil {
			var err error
			// Another replica, L1 off as the readers: every GET that
			// misses L2 stores what the upstream answered there.
			w := CPUSidecar{Name: "l2-writer", Bin: l.p.Sidecache, Env: []string{"GOMAXPROCS=1"}}
			if writer, err = l.startSidecarBin(ctx, w, "l2-reader", l.demoAddr, redis); err != nil {
				return fmt.Errorf("l2 writer: %w", err)
			}
		}
		if err := prefill(ctx, writer.addr, "/clients/", l.p.Keys); err != nil {
			return err
		}
		// Another replica serves an entry from L2 only once it is older
		// than coherence.max_lag (default 1s): until then an invalidation
		// it missed could still be on its way.
		time.Sleep(1500 * time.Millisecond)
		return nil
	}
	for k, sc := range sidecars {
		out = append(out, cpuEntry{row: "l2", test: "l2 hit", server: sc.Name + " (L2 hit, L1 off)",
			start: func() (*sut, error) { return l.startSidecarBin(ctx, sc, "l2-reader", l.demoAddr, redis) },
			prep:  fillL2, redis: redis, sidecar: k + 1})
	}
	// The floor: a Go server whose only work beyond serving from memory
	// is one Redis GET per request, on the same Redis, in the same rounds.
	if !cp.row("hit") {
		out = append(out, cpuEntry{row: "l2", test: "l2 hit", server: BareMemoryServer,
			start: func() (*sut, error) { return l.startBare(ctx, "GOMAXPROCS=1") },
			note:  func() string { return "measured here because the hit row, where it belongs, did not run" }})
	}
	out = append(out, cpuEntry{row: "l2", test: "l2 hit", server: BareRedisServer, redis: redis,
		start: func() (*sut, error) { return l.startBareRedis(ctx, redis) },
		note: func() string {
			return "the bare Go server's own records (the bytes its from-memory mode serves, 600 B–1 KB) stored in this Redis at its start, " +
				"each answer's body read with one GET on a pooled connection (the bench's minimal RESP client, bench/internal/resp Pool), " +
				"headers as from memory: what one Redis round trip alone costs a Go server"
		}})
	var size int
	var keys []string
	var sizeOnce sync.Once
	var sizeErr error
	plain := func() error {
		sizeOnce.Do(func() {
			if size, sizeErr = meanValueSize(ctx, redis, "bench-l2-reader:e:*"); sizeErr != nil {
				return
			}
			c, err := resp.Dial(ctx, redis)
			if sizeErr = err; err != nil {
				return
			}
			defer c.Close()
			v := strings.Repeat("x", size)
			for i := 1; i <= l.p.Keys; i++ {
				k := "bench-plain:" + strconv.Itoa(i)
				if _, sizeErr = c.Do("SET", k, v); sizeErr != nil {
					return
				}
				keys = append(keys, k)
			}
		})
		return sizeErr
	}
	note := func() string { return fmt.Sprintf("value %d B, the mean size of the L2 entries", size) }
	// The reference the goal is stated against: each GET at its own
	// instant, as vegeta sends the sidecar's requests. Beside it the
	// reference of earlier reports, a millisecond's GETs at once, which
	// share Redis's event-loop wake-ups and so cost it less per command.
	for _, ref := range []struct {
		server, note string
		batched      bool
	}{
		{"redis GET, paced per command (reference)", "each GET at its own instant, as vegeta paces the sidecar's requests", false},
		{"redis GET, paced in 1 ms batches (earlier reference)", "a 1 ms ticker releases what fell due at once: GETs arriving together share Redis's wake-ups; the reference of reports before 2026-11-25 20:00", true},
	} {
		out = append(out, cpuEntry{row: "l2", test: "l2 hit", server: ref.server, redis: redis,
			note: func() string { return note() + "; " + ref.note },
			cell: func(d time.Duration) (int, int, error) {
				if err := plain(); err != nil {
					return 0, 0, err
				}
				return pacedGets(ctx, redis, keys, cp.Rate, 16, d, ref.batched)
			}})
	}
	// The L2 hit's own command from the same loop: its MGET ÷ the paced
	// GET is what the command costs Redis beyond a GET, and the L2 hit ÷
	// it what the serving conditions (a sidecar under vegeta's load, its
	// connections) add, as the bare Go row shows for a GET.
	var reads [][]string
	var readsOnce sync.Once
	var readsErr error
	out = append(out, cpuEntry{row: "l2", test: "l2 hit", server: L2ReadLoopServer, redis: redis,
		note: func() string {
			return fmt.Sprintf("the MGET an L2 hit sends (the entry key, then the epoch key of each of the %d tags its header names), "+
				"for %d of the entries the readers serve, each at its own instant from the paced GET's loop", len(reads[0])-2, len(reads))
		},
		cell: func(d time.Duration) (int, int, error) {
			readsOnce.Do(func() { reads, readsErr = l2ReadCmds(ctx, redis, "bench-l2-reader:", l.p.Keys) })
			if readsErr != nil {
				return 0, 0, readsErr
			}
			return pacedCmds(ctx, redis, func(i int) []string { return reads[i%len(reads)] }, cp.Rate, 16, d, false)
		}})
	if bin, err := exec.LookPath("redis-benchmark"); err == nil {
		host, port, _ := strings.Cut(redis, ":")
		out = append(out, cpuEntry{row: "l2", test: "l2 hit", server: "redis-benchmark GET, closed loop (reference)", redis: redis, note: note,
			cell: func(d time.Duration) (int, int, error) {
				if err := plain(); err != nil {
					return 0, 0, err
				}
				n := int(d.Seconds() * float64(cp.Rate))
				for _, args := range [][]string{{"-t", "set", "-n", "1"}, {"-t", "get", "-n", strconv.Itoa(n), "-c", "16"}} {
					argv := append([]string{"-h", host, "-p", port, "-d", strconv.Itoa(size), "-q"}, args...)
					if b, err := exec.CommandContext(ctx, bin, argv...).CombinedOutput(); err != nil {
						return 0, 0, fmt.Errorf("redis-benchmark: %w: %s", err, b)
					}
				}
				return n, 0, nil
			}})
	}
	return out, nil
}
