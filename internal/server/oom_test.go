package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/redistest"
)

// Redis over maxmemory with the default policy (noeviction) refuses every
// command that may grow memory ("OOM command not allowed"): the epoch
// bump's SET among them, while PUBLISH, GET and MGET still run. On
// f93bcf7 a write through A answered 200, its peers dropped their L1
// copies, the replay gave the tag up after maxTries, and L2 went on
// serving the pre-write entry (Cache-Status: hit; detail=l2) until its
// TTL, past max_lag (the prober's h13b_oom). C starts after the write, so
// no tombstone of the write's message helps it: it reads what L2 says.
func TestNoStaleL2HitAfterWriteWhileRedisOutOfMemory(t *testing.T) {
	rs := redistest.Start(t, "--maxmemory-policy", "noeviction")
	o := newOrigin(t)
	a := startReplica(t, o.URL, l2Block(false, rs.Addr()))
	b := startReplica(t, o.URL, l2Block(false, rs.Addr()))
	ctx := context.Background()
	b.get(t, "/clients/44")
	if err := b.srv.FlushL2(ctx); err != nil {
		t.Fatal(err)
	}
	rc := rawClient(t, rs.Addr())
	if n := rc.Exists(ctx, entryKey("44")).Val(); n != 1 {
		keys, _ := rc.Keys(ctx, "*").Result()
		t.Fatalf("B's fill is not in L2 as %q: %q", entryKey("44"), keys)
	}
	setMaxmemory(t, rc, "1")
	if err := rc.Set(ctx, "probe", "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("Redis not out of memory: SET answered %v", err)
	}
	if code, _, _ := a.do(t, http.MethodPatch, "/clients/44"); code != 200 {
		t.Fatalf("PATCH: %d", code)
	}
	ack := time.Now()
	c := startReplica(t, o.URL, l2Block(false, rs.Addr()))
	waitProven(t, c)
	time.Sleep(time.Until(ack.Add(maxLag + maxLag/4)))
	if got, cs := c.get(t, "/clients/44"); got != body("44", 1) {
		t.Errorf("C, max_lag after the write, Redis out of memory: %q (%s), want %q", got, cs, body("44", 1))
	}
	// A fill while Redis refuses writes leaves no entry behind (the
	// entry's SET is refused with its epoch keys'), so nothing
	// half-written can pass later.
	b.get(t, "/clients/45")
	if err := b.srv.FlushL2(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rc.Exists(ctx, entryKey("45")).Val(); n != 0 {
		t.Errorf("an entry was stored while Redis was out of memory")
	}

	// Redis gets its memory back: writes invalidate as before, and the
	// replicas hit again.
	setMaxmemory(t, rc, "0")
	a.do(t, http.MethodPatch, "/clients/44")
	ack = time.Now()
	time.Sleep(time.Until(ack.Add(maxLag + maxLag/4)))
	for _, r := range []*replica{b, c} {
		if got, cs := r.get(t, "/clients/44"); got != body("44", 2) {
			t.Errorf("after Redis recovered: %q (%s), want %q", got, cs, body("44", 2))
		}
	}
	if err := b.srv.FlushL2(ctx); err != nil {
		t.Fatal(err)
	}
	waitProven(t, c)
	d := startReplica(t, o.URL, l2Block(false, rs.Addr()))
	waitProven(t, d)
	if got, cs := d.get(t, "/clients/44"); got != body("44", 2) || !strings.Contains(cs, "hit") {
		t.Errorf("D after Redis recovered: %q (%s), want an L2 hit of %q", got, cs, body("44", 2))
	}
}

// entryKey is the L2 key of GET /clients/{id} through a replica.
func entryKey(id string) string { return "sidecache:e:GET clients.svc/clients/" + id }

func setMaxmemory(t *testing.T, rc *redis.Client, v string) {
	t.Helper()
	if err := rc.ConfigSet(context.Background(), "maxmemory", v).Err(); err != nil {
		t.Fatal(err)
	}
}

// waitProven waits until r's heartbeats prove its channel (/readyz says
// "coherence":"proven"): from then on it serves entries older than
// max_lag, the ones a lost invalidation would leave stale.
func waitProven(t *testing.T, r *replica) {
	t.Helper()
	eventually(t, 10*time.Second, "coherence proven", func() bool {
		_, d := r.srv.Ready()
		return d["coherence"] == "proven"
	})
}

// Where Redis refuses the raise itself while it answers — here an ACL
// that lets the replicas write entries, leases and the note but not the
// epoch keys; the same holds for a read replica at the master's address
// or Redis before 7 over maxmemory — the fleet stops trusting entries
// fetched before the refusal (l2's refused.go): C, started after the
// replay gave the tag up, still refuses the entry the write replaced.
func TestNoStaleL2HitAfterWriteWhenRedisRefusesEpochRaise(t *testing.T) {
	rs := redistest.Start(t)
	o := newOrigin(t)
	a := startReplica(t, o.URL, l2Block(false, rs.Addr()))
	b := startReplica(t, o.URL, l2Block(false, rs.Addr()))
	ctx := context.Background()
	b.get(t, "/clients/46")
	if err := b.srv.FlushL2(ctx); err != nil {
		t.Fatal(err)
	}
	rc := rawClient(t, rs.Addr())
	acl := func(rules ...string) {
		t.Helper()
		args := append([]any{"ACL", "SETUSER", "default", "resetkeys"}, toAny(rules)...)
		if err := rc.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	acl("%R~*", "~sidecache:e:*", "~sidecache:l:*", "~sidecache:run")
	if code, _, _ := a.do(t, http.MethodPatch, "/clients/46"); code != 200 {
		t.Fatalf("PATCH: %d", code)
	}
	ack := time.Now()
	// Past the replay's last try (maxTries × max_lag/8).
	time.Sleep(time.Until(ack.Add(2 * maxLag)))
	c := startReplica(t, o.URL, l2Block(false, rs.Addr()))
	waitProven(t, c)
	if got, cs := c.get(t, "/clients/46"); got != body("46", 1) {
		t.Errorf("C after the write whose raise Redis refused: %q (%s), want %q", got, cs, body("46", 1))
	}

	// Redis takes raises again: the fleet hits again.
	acl("~*")
	a.do(t, http.MethodPatch, "/clients/46")
	time.Sleep(time.Until(time.Now().Add(maxLag + maxLag/4)))
	waitProven(t, c)
	if got, cs := c.get(t, "/clients/46"); got != body("46", 2) {
		t.Errorf("C after Redis took raises again: %q (%s), want %q", got, cs, body("46", 2))
	}
	if got, cs := c.get(t, "/clients/46"); got != body("46", 2) || !strings.Contains(cs, "hit") {
		t.Errorf("C's second read: %q (%s), want a hit of %q", got, cs, body("46", 2))
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
