package l2

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/redistest"
)

func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	a := newReplica(t, cl.Addrs())
	b := newReplica(t, cl.Addrs())
	ctx := context.Background()

	if _, ok := a.rdb.(*redis.ClusterClient); !ok {
		t.Fatalf("several addrs gave a %T, want a cluster client", a.rdb)
	}
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), DisableIdentity: true})
	t.Cleanup(func() { _ = rc.Close() })

	// Pick keys until every master owns at least two entries.
	perMaster := map[string][]string{}
	var keys []string
	for i := 0; len(perMaster) < 3 || slices.ContainsFunc(mapValues(perMaster), func(ks []string) bool { return len(ks) < 2 }); i++ {
		if i > 1000 {
			t.Fatalf("keys spread over %d masters only", len(perMaster))
		}
		key := fmt.Sprintf("GET /clients/%d", i)
		node, err := rc.MasterForKey(ctx, "test:e:"+key)
		if err != nil {
			t.Fatal(err)
		}
		perMaster[node.Options().Addr] = append(perMaster[node.Options().Addr], key)
		keys = append(keys, key)
	}

	// Tags alternate, so each tag's members span every master.
	for i, k := range keys {
		if err := a.Set(ctx, k, entry(k, time.Minute, fmt.Sprintf("tag%d", i%2), "route:client")); err != nil {
			t.Fatal(err)
		}
	}
	a.flush(t)
	for _, k := range keys {
		if e, ok := b.mustGet(t, k); !ok || string(e.Body) != k {
			t.Fatalf("Get(%q) = %v, %v", k, e, ok)
		}
	}

	if err := a.InvalidateTags(ctx, "tag0"); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		_, ok := b.mustGet(t, k)
		if ok != (i%2 == 1) {
			t.Fatalf("after invalidating tag0: Get(%q) hit = %v", k, ok)
		}
	}
	if got, err := b.GetMany(ctx, keys); err != nil {
		t.Fatal(err)
	} else {
		for i, e := range got {
			if (e != nil) != (i%2 == 1) {
				t.Fatalf("after invalidating tag0: GetMany[%q] hit = %v", keys[i], e != nil)
			}
		}
	}
	inv := b.nextInvalidation(t, time.Second)
	if !slices.Equal(inv.Tags, []string{"tag0"}) {
		t.Fatalf("peer got %+v", inv)
	}

	// A lease and WaitFill across slots.
	release, ok, _, err := a.Lease(ctx, keys[0], 5*time.Second)
	if err != nil || !ok {
		t.Fatalf("Lease = %v, %v", ok, err)
	}
	_ = a.Set(ctx, keys[0], entry("refilled", time.Minute))
	release(0)
	if e, ok, _, err := b.WaitFill(ctx, keys[0], 5*time.Second, time.Time{}); err != nil || !ok || string(e.Body) != "refilled" {
		t.Fatalf("WaitFill = %v, %v, %v", e, ok, err)
	}

	if _, err := a.PurgeAll(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range cl.Nodes() {
		keys, err := raw(t, n.Addr()).Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		// The epoch keys stay (purgeall.go): they expire on their own.
		for _, k := range keys {
			if !strings.HasPrefix(k, "test:v:") {
				t.Errorf("master %s holds %s after PurgeAll", n.Addr(), k)
			}
		}
	}
	if inv := b.nextInvalidation(t, time.Second); !inv.All {
		t.Fatalf("peer got %+v after PurgeAll, want All", inv)
	}
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
