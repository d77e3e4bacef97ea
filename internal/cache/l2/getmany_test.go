package l2

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// TestGetMany: one pipeline reads hits, misses and undecodable values, on
// a standalone server and across the slots of a Cluster.
func TestGetMany(t *testing.T) {
	for _, tc := range []struct {
		name  string
		addrs func(t *testing.T) []string
	}{
		{"standalone", func(t *testing.T) []string { return []string{redistest.Start(t).Addr()} }},
		{"cluster", func(t *testing.T) []string { return redistest.StartCluster(t, 3).Addrs() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addrs := tc.addrs(t)
			s := newReplica(t, addrs)
			ctx := context.Background()
			keys := make([]string, 30)
			for i := range keys {
				keys[i] = fmt.Sprintf("GET /users/%d", i)
				if i%3 != 2 {
					if err := s.Set(ctx, keys[i], entry(fmt.Sprint(i), time.Minute)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			// A value that is not an entry is a miss, not an error.
			if err := s.rdb.Set(ctx, s.entryKey(keys[0]), "garbage", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			es, err := s.GetMany(ctx, keys)
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range es {
				switch {
				case i == 0 || i%3 == 2:
					if e != nil {
						t.Errorf("key %d: got %q, want a miss", i, e.Body)
					}
				case e == nil || string(e.Body) != fmt.Sprint(i):
					t.Errorf("key %d: got %v, want body %d", i, e, i)
				}
			}
			if es, err := s.GetMany(ctx, nil); err != nil || len(es) != 0 {
				t.Fatalf("no keys: %v %v", es, err)
			}
		})
	}
}
