package l2

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// TestPubSubKeepsDatabasesApart: two fleets on one Redis with one prefix
// but different databases (cache.l2.redis.db 0 and 1) share the pub/sub
// channel (channels are global across a server's databases): each
// applied the other's invalidations, purges of everything and Losts.
// Messages now carry their db and another db's are ignored; one without
// it (a previous release's) is applied, so a rolling deploy's pods keep
// hearing each other. Fleet 1 publishes first, then fleet 0: a replica
// hears a channel's messages in the order Redis took them, so fleet 0's
// listener must hear its own fleet's message first, with nothing of
// fleet 1's before it.
func TestPubSubKeepsDatabasesApart(t *testing.T) {
	rs := redistest.Start(t)
	addrs := []string{rs.Addr()}
	db1 := func(o *Options) { o.DB = 1 }
	a0, d0 := newReplica(t, addrs), newReplica(t, addrs)
	b1, c1 := newReplica(t, addrs, db1), newReplica(t, addrs, db1)
	ctx := context.Background()
	if err := b1.InvalidateTags(ctx, "fleet1"); err != nil {
		t.Fatal(err)
	}
	if err := b1.publish(ctx, Invalidation{All: true}); err != nil {
		t.Fatal(err)
	}
	// A previous release's message: no db, applied by both fleets.
	if err := b1.rdb.Publish(ctx, b1.channel(), `{"tags":["old"],"origin":"previous"}`).Err(); err != nil {
		t.Fatal(err)
	}
	if err := d0.InvalidateTags(ctx, "fleet0"); err != nil {
		t.Fatal(err)
	}
	next := func(r *replica, who string) Invalidation {
		t.Helper()
		select {
		case inv := <-r.inv:
			return inv
		case <-time.After(10 * time.Second):
			t.Fatalf("%s heard nothing in 10s", who)
			return Invalidation{}
		}
	}
	for _, want := range [][]string{{"old"}, {"fleet0"}} {
		if inv := next(a0, "db 0"); !slices.Equal(inv.Tags, want) || inv.All {
			t.Fatalf("db 0 heard %+v, want tags %q: another database's messages are not its fleet's", inv, want)
		}
	}
	for _, want := range []Invalidation{{Tags: []string{"fleet1"}}, {All: true}, {Tags: []string{"old"}}} {
		if inv := next(c1, "db 1"); !slices.Equal(inv.Tags, want.Tags) || inv.All != want.All {
			t.Fatalf("db 1 heard %+v, want %+v from its own fleet", inv, want)
		}
	}
}
