package l2

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/redistest"
)

// TestRefusedRaiseResentAtMostOnce: go-redis retries a pipeline whose
// first command's reply is NOREPLICAS or READONLY (shouldRetry), the
// PUBLISH that Redis took included, so a write's invalidation refused
// that way reaches the peers twice (clientOptions' MaxRetries: 1). That
// is harmless, and left so: the two copies are the same bytes, and a
// copy drops tags from L1 and adds a tombstone, which a second does
// again; no epoch is raised twice, since the pipeline is resent only when
// its first raise was refused, and a raise never lowers an epoch
// (bumpScript, the same ARGV both times). Keeping the retry keeps what
// it is for: a pooled connection that died with a restarted Redis. This
// pins the bound: at most MaxRetries+1 copies, identical, and no epoch.
func TestRefusedRaiseResentAtMostOnce(t *testing.T) {
	rs := redistest.Start(t)
	s := newReplica(t, []string{rs.Addr()})
	rc := raw(t, rs.Addr())
	ctx := context.Background()
	sub := rc.Subscribe(ctx, s.channel())
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	if err := rc.ConfigSet(ctx, "min-replicas-to-write", "1").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.ConfigSet(context.Background(), "min-replicas-to-write", "0").Err() })
	if err := s.InvalidateTags(ctx, "resent"); err == nil || !WritesRefused(err) {
		t.Fatalf("InvalidateTags: %v, want NOREPLICAS", err)
	}
	if err := rc.Publish(ctx, s.channel(), "sentinel").Err(); err != nil {
		t.Fatal(err)
	}
	var copies []string
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		m, err := sub.ReceiveMessage(rctx)
		if err != nil {
			t.Fatalf("before the sentinel: %v", err)
		}
		if m.Payload == "sentinel" {
			break
		}
		var inv Invalidation
		if err := json.Unmarshal([]byte(m.Payload), &inv); err == nil && strings.Join(inv.Tags, ",") == "resent" {
			copies = append(copies, m.Payload)
		}
	}
	t.Logf("the refused invalidation was published %d times", len(copies))
	if len(copies) < 1 || len(copies) > 2 {
		t.Fatalf("published %d times, want 1 or 2 (MaxRetries 1)", len(copies))
	}
	if len(copies) == 2 && copies[0] != copies[1] {
		t.Errorf("the copies differ: %q, %q", copies[0], copies[1])
	}
	if err := rc.Get(ctx, s.epochKey("resent")).Err(); err != redis.Nil {
		t.Errorf("epoch key of the refused raise: %v, want none", err)
	}
}
