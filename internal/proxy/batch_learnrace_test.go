package proxy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The waiters of a bulk call are judged by what the call sent, not by the
// route's forwarding rules as they are when its answer comes: a route that
// learns a Vary'd header (X-Tenant) while a call is in flight — its first
// learning, or its learning again after a reload made its rules anew —
// forwards and groups on it from then on, but the call in flight was sent,
// and its batch grouped, without it. The invariant harness's reload-torn
// row with bulk-vary-withheld saw "GET /s/1 [X-Tenant=globex]: answer for
// tenant=""".

// learnRaceOrigin is a bulk origin whose answers vary on X-Tenant (and say
// which tenant they were made for); hold, when it returns a channel for a
// call, keeps that call until the channel closes, and fail answers a call
// 503 when it says so.
func learnRaceOrigin(t *testing.T, hold func(ids []string, tenant string) chan struct{}, fail func(ids []string, tenant string) bool) *bulkOrigin {
	return newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		tenant := r.Header.Get("X-Tenant")
		if c := hold(ids, tenant); c != nil {
			<-c
		}
		if fail(ids, tenant) {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Vary", "X-Tenant")
		usersAnswer(func(string) bool { return true }, "X-Tenant")(w, r, ids)
	})
}

// tenantOf is the tenant the one element of a's body was made for.
func tenantOf(t *testing.T, a answer) string {
	t.Helper()
	var el map[string]any
	if err := json.Unmarshal([]byte(a.body), &el); err != nil {
		t.Fatalf("%q: %v", a.body, err)
	}
	tn, _ := el["x-tenant"].(string)
	return tn
}

// TestBatchLearnedMidCallNotStoredAsOpenersVariant: a bulk call sent
// without X-Tenant (not learned yet) for an opener of tenant globex is
// answered with Vary: X-Tenant after the route learned X-Tenant from
// another call. Its element, made without the header, was stored as
// globex's variant (elementVary asked whether the route groups on the
// header now; admit whether it forwards it now), and globex's next read
// of the id was served tenant "" from L1. It is the variant of no
// request the opener's tenant makes: not stored.
func TestBatchLearnedMidCallNotStoredAsOpenersVariant(t *testing.T) {
	held, arrived := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	failed := false
	o := learnRaceOrigin(t, func(ids []string, tenant string) chan struct{} {
		if slices.Equal(ids, []string{"1"}) && tenant == "" {
			once.Do(func() { close(arrived) })
			return held
		}
		return nil
	}, func(ids []string, tenant string) bool {
		// The opener's own call (it fetches its own once told the
		// shared answer was made without its header) fails once, so
		// it does not overwrite what the shared call stored.
		mu.Lock()
		defer mu.Unlock()
		if slices.Equal(ids, []string{"1"}) && tenant == "globex" && !failed {
			failed = true
			return true
		}
		return false
	})
	rt := userRoute(1, time.Minute) // every request its own call, at once
	e := newEnv(t, o.upstream, []testRoute{rt})
	ctx := context.Background()
	globex := http.Header{"X-Tenant": {"globex"}}

	first := make(chan answer, 1)
	go func() { first <- fetch(ctx, e.front.URL+"/users/1", globex) }()
	<-arrived // /users/1's call left without X-Tenant, and is held
	// Another call teaches the route X-Tenant meanwhile.
	if a := fetch(ctx, e.front.URL+"/users/2", http.Header{"X-Tenant": {"acme"}}); a.err != nil || a.code != http.StatusOK || tenantOf(t, a) != "acme" {
		t.Fatalf("/users/2 as acme: %d %v %q", a.code, a.err, a.body)
	}
	close(held)
	if a := <-first; a.err == nil && a.code == http.StatusOK && tenantOf(t, a) != "globex" {
		t.Errorf("/users/1 as globex (the opener): answer made for tenant %q", tenantOf(t, a))
	}
	a := fetch(ctx, e.front.URL+"/users/1", globex)
	if a.err != nil || a.code != http.StatusOK {
		t.Fatalf("/users/1 as globex, again: %d %v %q", a.code, a.err, a.body)
	}
	if tn := tenantOf(t, a); tn != "globex" {
		t.Errorf("/users/1 as globex, again: answer made for tenant %q (%s)", tn, a.header.Get("Cache-Status"))
	}
}

// TestBatchLearnedWhileQueuedMemberNotHandedOpenersVariant: two requests,
// globex's and one without X-Tenant, join one batch while the route does
// not group on X-Tenant; the route learns it before their call leaves, so
// the call carries the opener's X-Tenant: globex, and its answer varies on
// it. The member without the header was handed globex's element (a
// bulk call's waiters were told apart by what the call did not send, and
// this one sent everything the route forwards): it fetches its own.
func TestBatchLearnedWhileQueuedMemberNotHandedOpenersVariant(t *testing.T) {
	held, arrived := make(chan struct{}), make(chan struct{})
	var once sync.Once
	o := learnRaceOrigin(t, func(ids []string, _ string) chan struct{} {
		if slices.Equal(ids, []string{"9"}) {
			once.Do(func() { close(arrived) })
			return held
		}
		return nil
	}, func([]string, string) bool { return false })
	rt := userRoute(2, time.Millisecond)
	rt.Batch.MaxInFlight = 1 // the batch below waits for /users/9's call
	e := newEnv(t, o.upstream, []testRoute{rt})
	ctx := context.Background()

	var wg sync.WaitGroup
	var got [3]answer
	wg.Go(func() { got[0] = fetch(ctx, e.front.URL+"/users/9", nil) })
	<-arrived
	wg.Go(func() { got[1] = fetch(ctx, e.front.URL+"/users/5", http.Header{"X-Tenant": {"globex"}}) })
	waitUntil(t, "globex's /users/5 queued", func() bool { return e.h.BatchQueued("user") == 1 })
	wg.Go(func() { got[2] = fetch(ctx, e.front.URL+"/users/6", nil) })
	waitUntil(t, "/users/6 queued behind it", func() bool { return e.h.BatchQueued("user") == 2 })
	// The route learns X-Tenant from a call of another group (another
	// Host), while the batch of /users/5 and /users/6 waits.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.front.URL+"/users/7", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "other.example"
	req.Header.Set("X-Tenant", "acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/users/7 on other.example: %d", resp.StatusCode)
	}
	close(held)
	wg.Wait()
	for i, want := range []string{"", "globex", ""} {
		a := got[i]
		if a.err != nil || a.code != http.StatusOK {
			t.Errorf("request %d: %d %v %q", i, a.code, a.err, a.body)
			continue
		}
		if tn := tenantOf(t, a); tn != want {
			t.Errorf("request %d (X-Tenant %q): answer made for tenant %q", i, want, tn)
		}
	}
	// The batch's call did carry globex's header (else the test shows
	// nothing).
	var sent bool
	for _, c := range o.snapshot() {
		if slices.Equal(c.ids, []string{"5", "6"}) && strings.EqualFold(c.header.Get("X-Tenant"), "globex") {
			sent = true
		}
	}
	if !sent {
		t.Errorf("no call for /users/5 and /users/6 with X-Tenant: globex: %v", o.snapshot())
	}
}

// TestReloadKeepsLearnedForwarding: a reload that leaves a route as it was
// (name, pattern, key, forward_headers) keeps what its rules learned from
// Vary: a request of the header's tenant after it is sent with the header
// at once (one bulk call, not the withheld one and then its own), so a
// reload does not reopen the window in which calls that left without the
// header and calls that carried it are in flight together; nor does a
// half-written file that drops the route, once the whole file brings it
// back. A route whose key changed starts afresh.
func TestReloadKeepsLearnedForwarding(t *testing.T) {
	o := learnRaceOrigin(t, func([]string, string) chan struct{} { return nil }, func([]string, string) bool { return false })
	rt := userRoute(1, time.Minute)
	e := newEnv(t, o.upstream, []testRoute{rt})
	acme := http.Header{"X-Tenant": {"acme"}}
	calls := func(path string) int {
		t.Helper()
		before := len(o.snapshot())
		a := fetch(context.Background(), e.front.URL+path, acme)
		if a.err != nil || a.code != http.StatusOK || tenantOf(t, a) != "acme" {
			t.Fatalf("%s as acme: %d %v %q", path, a.code, a.err, a.body)
		}
		return len(o.snapshot()) - before
	}
	if n := calls("/users/1"); n != 2 {
		t.Fatalf("/users/1: %d bulk calls, want 2 (without X-Tenant, then its own with it)", n)
	}
	e.h.SetRoutes(compile(t, []testRoute{rt})) // the same file again
	if n := calls("/users/2"); n != 1 {
		t.Errorf("/users/2 after a reload of the same route: %d bulk calls, want 1 (X-Tenant still forwarded)", n)
	}
	// A half-written file drops the route; the whole file brings it back
	// as it was.
	other := testRoute{Name: "other", Pattern: "/other/{id}", TTL: time.Minute}
	e.h.SetRoutes(compile(t, []testRoute{other}))
	e.h.SetRoutes(compile(t, []testRoute{other, rt}))
	if n := calls("/users/4"); n != 1 {
		t.Errorf("/users/4 after a reload that dropped the route and one that brought it back: %d bulk calls, want 1", n)
	}
	rekeyed := rt
	rekeyed.Key.Headers = []string{"Accept-Language"}
	e.h.SetRoutes(compile(t, []testRoute{rekeyed}))
	if n := calls("/users/3"); n != 2 {
		t.Errorf("/users/3 after a reload that rekeyed the route: %d bulk calls, want 2 (it starts afresh)", n)
	}
}
