package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/redistest"
)

// The promise (README "When things fail"): a read that starts more than
// coherence.max_lag after a write's 2xx reached its client never returns
// the pre-write version, on any replica, whatever Redis does. Each test
// below runs writes through replica A and reads through B (and A) for
// about four seconds around one Redis fault, and checks every read
// against every write acknowledged more than max_lag before it started.

const maxLag = time.Second // coherence.max_lag's default, which the replicas use

type write struct {
	ack time.Time
	v   int
}

type read struct {
	id    string
	start time.Time
	v     int
	hit   bool
	onB   bool
}

func version(t *testing.T, b string) int {
	t.Helper()
	i := strings.LastIndex(b, "-v")
	v, err := strconv.Atoi(b[i+2:])
	if i < 0 || err != nil {
		t.Errorf("body %q has no version", b)
	}
	return v
}

// checkCoherence runs the load, calls fault once the replicas are warm,
// and fails on any stale read.
func checkCoherence(t *testing.T, addr string, fault func()) {
	checkCoherenceOn(t, addr, false, fault)
}

// checkCoherenceOn is checkCoherence with, if l1Off, B's L1 off: each of
// its hits is then an L2 hit (read by MGET once B knows the key's tags).
func checkCoherenceOn(t *testing.T, addr string, l1Off bool, fault func()) {
	o := newOrigin(t)
	a := startReplica(t, o.URL, l2Block(false, addr))
	var b *replica
	if l1Off {
		b = startReplicaYAML(t, strings.Replace(fmt.Sprintf(baseConfig, o.URL, l2Block(false, addr)), "max_bytes: 16MiB", "max_bytes: 0", 1))
	} else {
		b = startReplica(t, o.URL, l2Block(false, addr))
	}
	ids := []string{"1", "2", "3", "4"}

	var mu sync.Mutex
	writes := map[string][]write{}
	var reads []read
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // one writer through A, paced
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			id := ids[i%len(ids)]
			code, _, body, err := a.try(http.MethodPatch, "/clients/"+id)
			ack := time.Now()
			if err == nil && code == http.StatusOK {
				mu.Lock()
				writes[id] = append(writes[id], write{ack, version(t, body)})
				mu.Unlock()
			}
		}
	}()
	for i, r := range []*replica{b, b, a} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; ; j++ {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				id := ids[j%len(ids)]
				start := time.Now()
				code, h, body, err := r.try(http.MethodGet, "/clients/"+id)
				if err != nil || code != http.StatusOK {
					continue
				}
				mu.Lock()
				reads = append(reads, read{id, start, version(t, body), strings.Contains(h.Get("Cache-Status"), "hit"), r == b})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Second)
	fault()
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()

	nw, checked, onB, hitsB, stale := 0, 0, 0, 0, 0
	for _, ws := range writes {
		nw += len(ws)
	}
	for _, rd := range reads {
		if rd.onB {
			onB++
			if rd.hit {
				hitsB++
			}
		}
		want := 0 // the newest version acknowledged more than maxLag before the read
		for _, w := range writes[rd.id] {
			if w.ack.Before(rd.start.Add(-maxLag)) && w.v > want {
				want = w.v
			}
		}
		if want > 0 {
			checked++
		}
		if rd.v < want {
			stale++
			if stale <= 5 {
				t.Errorf("stale read of %s on %s at %s: v%d, v%d was acknowledged before %s",
					rd.id, map[bool]string{true: "B", false: "A"}[rd.onB], rd.start.Format("15:04:05.000"), rd.v, want, rd.start.Add(-maxLag).Format("15:04:05.000"))
			}
		}
	}
	t.Logf("%d writes through A; %d reads (%d through B, %d of those hits), %d of them after a write's max_lag; %d stale",
		nw, len(reads), onB, hitsB, checked, stale)
	if nw == 0 || checked == 0 {
		t.Fatalf("nothing checked: %d writes, %d reads after max_lag", nw, checked)
	}
}

func rawClient(t *testing.T, addr string) *redis.Client {
	rc := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rc.Close() })
	return rc
}

func pause(t *testing.T, addr, mode string) func() {
	return func() {
		if err := rawClient(t, addr).Do(context.Background(), "CLIENT", "PAUSE", "1500", mode).Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond)
	}
}

func TestNoStaleReadAfterMaxLagWhileRedisPausedForWrites(t *testing.T) {
	rs := redistest.Start(t)
	checkCoherence(t, rs.Addr(), pause(t, rs.Addr(), "WRITE"))
}

func TestNoStaleReadAfterMaxLagWhileRedisPausedForAll(t *testing.T) {
	rs := redistest.Start(t)
	checkCoherence(t, rs.Addr(), pause(t, rs.Addr(), "ALL"))
}

func TestNoStaleReadAfterMaxLagWhenRedisKilledAndRestarted(t *testing.T) {
	rs := redistest.Start(t)
	checkCoherence(t, rs.Addr(), func() {
		rs.Kill()
		time.Sleep(1500 * time.Millisecond)
		rs.Restart()
	})
}

// Under allkeys-lru Redis may evict the keys invalidation relies on; the
// fault deletes them outright for 1.5 s while junk fills memory.
func TestNoStaleReadAfterMaxLagWhenTagKeysEvicted(t *testing.T) {
	evictTagKeys(t, false)
}

// The same with B's L1 off: every hit on B is an L2 hit, read by one MGET
// of the entry and the epoch keys of the tags B guessed (l2/fastread.go),
// while those keys come and go.
func TestNoStaleL2ReadAfterMaxLagWhenTagKeysEvicted(t *testing.T) {
	evictTagKeys(t, true)
}

// And while Redis takes no writes: no epoch is raised, no message goes out.
func TestNoStaleL2ReadAfterMaxLagWhileRedisPausedForWrites(t *testing.T) {
	rs := redistest.Start(t)
	checkCoherenceOn(t, rs.Addr(), true, pause(t, rs.Addr(), "WRITE"))
}

func evictTagKeys(t *testing.T, l1Off bool) {
	rs := redistest.Start(t, "--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru")
	rc := rawClient(t, rs.Addr())
	ctx := context.Background()
	var evicted atomic.Int64
	checkCoherenceOn(t, rs.Addr(), l1Off, func() {
		junk := strings.Repeat("x", 16<<10)
		for i := 0; i < 150; i++ {
			for _, pat := range []string{"sidecache:v:*", "sidecache:t:*"} {
				keys, _ := rc.Keys(ctx, pat).Result()
				if len(keys) > 0 {
					evicted.Add(rc.Del(ctx, keys...).Val())
				}
			}
			_ = rc.Set(ctx, fmt.Sprint("junk:", i), junk, 0).Err()
			time.Sleep(10 * time.Millisecond)
		}
	})
	if evicted.Load() == 0 {
		t.Fatal("no tag key was ever deleted: the fault did not happen")
	}
	t.Logf("%d tag keys deleted", evicted.Load())
}

// TestWriteVisibleAfterTagKeyDeleted is the repro: with the tag's
// keys gone from Redis (evicted under allkeys-lru), a write through A must
// still hide v0 from L2. C starts after the write, so no tombstone of the
// write's peer message helps it: it reads what L2 says (the old code
// served v0 from L2 for the rest of the TTL).
func TestWriteVisibleAfterTagKeyDeleted(t *testing.T) {
	rs := redistest.Start(t)
	o := newOrigin(t)
	a := startReplica(t, o.URL, l2Block(false, rs.Addr()))
	b := startReplica(t, o.URL, l2Block(false, rs.Addr()))
	a.get(t, "/clients/42")
	eventually(t, 5*time.Second, "B hits L2", func() bool {
		_, cs := b.get(t, "/clients/42")
		return strings.Contains(cs, "hit")
	})
	rc := rawClient(t, rs.Addr())
	ctx := context.Background()
	tagKeys := []string{"sidecache:t:client:42", "sidecache:v:client:42"}
	rc.Del(ctx, tagKeys...)
	a.do(t, http.MethodPatch, "/clients/42")
	c := startReplica(t, o.URL, l2Block(false, rs.Addr()))
	if got, cs := c.get(t, "/clients/42"); got != body("42", 1) {
		t.Errorf("C after the write: %q (%s), want %q", got, cs, body("42", 1))
	}
	// The same once the key the write left behind is evicted too.
	rc.Del(ctx, tagKeys...)
	d := startReplica(t, o.URL, l2Block(false, rs.Addr()))
	if got, cs := d.get(t, "/clients/42"); got != body("42", 1) {
		t.Errorf("D after the write and a second eviction: %q (%s), want %q", got, cs, body("42", 1))
	}
}
