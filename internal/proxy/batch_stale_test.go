package proxy_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestBatchedMissStaleIfErrorFromSharedTier: a batched miss whose fill
// finds a stale copy in the shared tier (the request's own lookup, L1
// only, found nothing) answers a failed bulk call with that copy
// (stale-if-error): the copy rides in the flight's lead until the batch
// answers (lead.Loaded: flight.stale), and nothing else holds it.
func TestBatchedMissStaleIfErrorFromSharedTier(t *testing.T) {
	o, failing := failingUsersOrigin(t)
	c := &clock{}
	rt := userRoute(10, time.Millisecond)
	rt.TTL, rt.StaleIfError = time.Second, time.Hour
	e := newEnv(t, o.upstream, []testRoute{rt}, withSharedTierOnly, withClock(c))
	ctx := context.Background()
	if a := fetch(ctx, e.front.URL+"/users/7", nil); a.err != nil || a.code != 200 || !strings.Contains(a.header.Get("Cache-Status"), "stored") {
		t.Fatalf("priming: %d %q %v, want a stored batched miss", a.code, a.header.Get("Cache-Status"), a.err)
	}
	c.advance(2 * time.Second) // stale, within stale-if-error
	failing.Store(true)
	a := fetch(ctx, e.front.URL+"/users/7", nil)
	if a.err != nil || a.code != 200 || a.body != userJSON("7", nil) || !strings.Contains(a.header.Get("Cache-Status"), "stale-if-error") {
		t.Errorf("failed bulk call: %d %q %q %v, want the stale copy (stale-if-error)", a.code, a.header.Get("Cache-Status"), a.body, a.err)
	}
	if n := len(o.snapshot()); n != 2 {
		t.Errorf("%d bulk calls, want 2: the stale copy was served after the failed call", n)
	}
}
