package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/redistest"
)

// writeRefusals are the two ways a Redis that still answers refuses every
// write: a failed snapshot (MISCONF; stop-writes-on-bgsave-error is on by
// default) and a master short of min-replicas-to-write (NOREPLICAS).
var writeRefusals = []struct {
	name   string
	args   []string
	refuse func(t *testing.T, rc *redis.Client) (undo func())
}{
	{"misconf", []string{"--enable-protected-configs", "yes"}, failSnapshot},
	{"noreplicas", nil, wantReplicas},
}

// A Redis that refuses every write while it still answers — its last
// snapshot failed (a full disk: MISCONF, stop-writes-on-bgsave-error is on
// by default), or a master with min-replicas-to-write short of replicas
// (NOREPLICAS) — refuses the epoch raise and the note's raise (restart.go),
// scripts that may write and SET alike, while GET, MGET, TIME and PUBLISH
// still run: every replica's heartbeats come back, and the write's
// message and its Lost go out. The replay counted each refusal as a try
// about the tag and gave the tag up after maxTries (about max_lag); once
// Redis took writes again nothing raised the epoch, and C, started
// afterwards (a rolling deploy), adopted the note's old floor and served
// the entry the write replaced from L2 until its TTL.
func TestNoStaleL2HitAfterWriteWhileRedisRefusesWrites(t *testing.T) {
	for _, tc := range writeRefusals {
		t.Run(tc.name, func(t *testing.T) {
			rs := redistest.Start(t, tc.args...)
			o := newOrigin(t)
			a := startReplica(t, o.URL, l2Block(false, rs.Addr()))
			b := startReplica(t, o.URL, l2Block(false, rs.Addr()))
			ctx := context.Background()
			rc := rawClient(t, rs.Addr())
			// B's fill of id in L2; a store a loaded machine made miss
			// its Redis timeout is tried again with another id.
			id := ""
			for n := 0; id == ""; n++ {
				if n == 20 {
					t.Fatalf("none of B's 20 fills is in L2 (as %q)", entryKey("480"))
				}
				try := fmt.Sprint(480 + n)
				b.get(t, "/clients/"+try)
				if err := b.srv.FlushL2(ctx); err != nil {
					t.Fatal(err)
				}
				if rc.Exists(ctx, entryKey(try)).Val() == 1 {
					id = try
				}
			}
			undo := tc.refuse(t, rc)
			if err := rc.Publish(ctx, "probe", "x").Err(); err != nil {
				t.Fatalf("PUBLISH refused too: %v", err)
			}
			if code, _, _ := a.do(t, http.MethodPatch, "/clients/"+id); code != 200 {
				t.Fatalf("PATCH: %d", code)
			}
			ack := time.Now()
			// Past the replay's last try had it counted these refusals
			// (maxTries replays, each max_lag/2 apart while Redis takes
			// no write), Redis refusing writes all along.
			time.Sleep(time.Until(ack.Add(5 * maxLag)))
			undo()
			if err := rc.Set(ctx, "probe", "x", 0).Err(); err != nil {
				t.Fatalf("Redis still refuses writes: %v", err)
			}
			c := startReplica(t, o.URL, l2Block(false, rs.Addr()))
			waitProven(t, c)
			if got, cs := c.get(t, "/clients/"+id); got != body(id, 1) {
				t.Errorf("C, started once Redis took writes again: %q (%s), want %q", got, cs, body(id, 1))
			}
			if got, cs := b.get(t, "/clients/"+id); got != body(id, 1) {
				t.Errorf("B: %q (%s), want %q", got, cs, body(id, 1))
			}
		})
	}
}

// failSnapshot makes rc's Redis fail a snapshot (its dir where no file can
// be made) with saving on, so that it refuses writes with MISCONF.
func failSnapshot(t *testing.T, rc *redis.Client) (undo func()) {
	t.Helper()
	ctx := context.Background()
	dir := rc.ConfigGet(ctx, "dir").Val()["dir"]
	configSet(t, rc, "save", "3600 1", "dir", "/proc")
	if err := rc.BgSave(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	refusing(t, rc, "MISCONF")
	return func() { configSet(t, rc, "dir", dir, "save", "") }
}

// wantReplicas makes rc's Redis, which has none, ask for a replica before
// it takes a write (min-replicas-to-write), so that it refuses them with
// NOREPLICAS.
func wantReplicas(t *testing.T, rc *redis.Client) (undo func()) {
	t.Helper()
	configSet(t, rc, "min-replicas-to-write", "1")
	refusing(t, rc, "NOREPLICAS")
	return func() { configSet(t, rc, "min-replicas-to-write", "0") }
}

func configSet(t *testing.T, rc *redis.Client, kv ...string) {
	t.Helper()
	for i := 0; i+1 < len(kv); i += 2 {
		if err := rc.ConfigSet(context.Background(), kv[i], kv[i+1]).Err(); err != nil {
			t.Fatalf("CONFIG SET %s %s: %v", kv[i], kv[i+1], err)
		}
	}
}

// refusing waits until rc's Redis refuses a SET with code.
func refusing(t *testing.T, rc *redis.Client, code string) {
	t.Helper()
	eventually(t, 10*time.Second, "redis refusing writes with "+code, func() bool {
		err := rc.Set(context.Background(), "probe", "x", 0).Err()
		return err != nil && strings.HasPrefix(err.Error(), code)
	})
}
