package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/proxy"
)

// withSharedTierOnly models `l1.max_bytes: 0` with an L2: LookupLocal
// always misses, and the flight leader reads the shared tier.
func withSharedTierOnly(o *proxy.Options, s *l1.Store) {
	o.Cache = cache.NewTiered(nil, s, cache.TieredOptions{})
}

// heldStore is a real store whose next read, once hold is called, waits
// until release is closed: a test holds a flight's tier read for as long as
// it needs, without sleeping. gets counts every read.
type heldStore struct {
	cache.Store
	t       testing.TB
	gets    atomic.Int64
	armed   atomic.Bool
	arrived chan struct{} // closed when the held read has begun
	release chan struct{}
}

func newHeldStore(t testing.TB, s cache.Store) *heldStore {
	return &heldStore{Store: s, t: t, arrived: make(chan struct{}), release: make(chan struct{})}
}

// hold makes the next read wait for release (once).
func (s *heldStore) hold() { s.armed.Store(true) }

func (s *heldStore) Get(ctx context.Context, key string) (*cache.Entry, bool, error) {
	s.gets.Add(1)
	if s.armed.CompareAndSwap(true, false) {
		close(s.arrived)
		held(s.t, s.release)
	}
	return s.Store.Get(ctx, key)
}

// Two variants of one URL (Vary: Accept-Language) are in the shared tier,
// and this replica has no L1 (`l1.max_bytes: 0`), so no request knows the
// variants marker before its flight: every flight is keyed on the primary
// key, and "fr" collapses onto the flight "en" leads. That flight finds
// en's variant in the cache; fr must not get its body but fetch its own
// (the flight keeps the variant it found, candidate.vkey and vary, for
// answers to judge; once it did not).
//
// en's tier read is held until fr is seen waiting on a flight without
// having read a tier itself: fr provably joined en's flight. The counts
// after it say the same: no tier read of fr's, and one upstream call, fr's
// own fetch.
func TestCollapsedOntoCacheHitGetsOwnVariant(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Vary", "Accept-Language")
		fmt.Fprint(w, "lang="+r.Header.Get("Accept-Language"))
	})
	// forward_headers: all, so priming costs one call per variant (the
	// keyed default spends one more, once, learning the Vary'd header:
	// see TestVaryOnWithheldHeaderIsLearned).
	rt := testRoute{Name: "greet", Pattern: "/greet/{id}", TTL: time.Minute, ForwardAll: true}
	var l2 *heldStore
	e := newEnv(t, up, []testRoute{rt}, func(o *proxy.Options, s *l1.Store) {
		l2 = newHeldStore(t, s)
		o.Cache = cache.NewTiered(nil, l2, cache.TieredOptions{})
	})
	t.Cleanup(func() {
		select {
		case <-l2.release:
		default:
			close(l2.release)
		}
	})
	for _, lang := range []string{"en", "fr"} {
		if _, b := e.do("GET", "/greet/1", http.Header{"Accept-Language": {lang}}); b != "lang="+lang {
			t.Fatalf("priming %s: %q", lang, b)
		}
	}
	if n := up.calls.Load(); n != 2 {
		t.Fatalf("priming made %d upstream calls, want 2", n)
	}
	up.calls.Store(0)
	l2.gets.Store(0)

	l2.hold()
	en := make(chan *http.Response, 1)
	enBody := make(chan string, 1)
	go func() {
		r, b := e.do("GET", "/greet/1", http.Header{"Accept-Language": {"en"}})
		en <- r
		enBody <- b
	}()
	await(t, l2.arrived) // en leads the flight and is reading the variants marker
	var joined atomic.Int64
	fr := make(chan *http.Response, 1)
	frBody := make(chan string, 1)
	go func() {
		r, b := e.doCounted("GET", "/greet/1", http.Header{"Accept-Language": {"fr"}}, &joined)
		fr <- r
		frBody <- b
	}()
	waitFor(t, func() bool { return joined.Load() >= 1 }) // fr waits on a flight
	if n := l2.gets.Load(); n != 1 {
		t.Fatalf("fr began to wait after %d tier reads, want 1 (en's, held): it did not join en's flight", n)
	}
	close(l2.release)

	r, b := <-en, <-enBody
	if b != "lang=en" || !strings.Contains(cacheStatus(r), "hit") {
		t.Errorf("en = %q (Cache-Status %q), want its variant from the cache", b, cacheStatus(r))
	}
	r, b = <-fr, <-frBody
	if b != "lang=fr" {
		t.Errorf("fr, collapsed onto en's cache hit, got %q (Cache-Status %q), want lang=fr", b, cacheStatus(r))
	}
	// en's flight read the marker and en's variant; fr read nothing (a
	// waiter, then a fetch of its own, which skips the tiers).
	if g, c := l2.gets.Load(), up.calls.Load(); g != 2 || c != 1 {
		t.Errorf("tier reads = %d, upstream calls = %d; want 2 (en's flight) and 1 (fr's own fetch)", g, c)
	}
}

// A response with Vary that is not stored (here a 404 on a route without
// negative_ttl) is still handed to collapsed waiters; store() returns before
// it records f.vary, so a waiter asking for another variant gets this one.
func TestUnstoredVariantNotSharedAcrossVariants(t *testing.T) {
	var calls atomic.Int64
	arrived := make(chan struct{})
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 { // the leader's call, held until the other joined
			close(arrived)
			held(t, release)
		}
		w.Header().Set("Vary", "Accept-Language")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, "lang="+r.Header.Get("Accept-Language"))
	})
	rt := testRoute{Name: "greet", Pattern: "/greet/{id}", TTL: time.Minute}
	e := newEnv(t, up, []testRoute{rt})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	bodies := map[string]chan string{"en": make(chan string, 1), "de": make(chan string, 1)}
	go func() { _, b := e.do("GET", "/greet/1", http.Header{"Accept-Language": {"en"}}); bodies["en"] <- b }()
	await(t, arrived)
	var joined atomic.Int64
	go func() {
		_, b := e.doCounted("GET", "/greet/1", http.Header{"Accept-Language": {"de"}}, &joined)
		bodies["de"] <- b
	}()
	waitFor(t, func() bool { return joined.Load() >= 1 }) // de waits on en's flight
	close(release)
	for lang, ch := range bodies {
		if b := <-ch; b != "lang="+lang {
			t.Errorf("Accept-Language %s got %q (another variant)", lang, b)
		}
	}
}

// Read-your-write: a GET that starts after a write was answered must not
// receive a response fetched before it. The tombstone check in usable()
// needs e.Tags, but store() sets them only on responses it keeps, so an
// unstored answer (a 404 without negative_ttl: "not created yet") fetched
// before the PUT is handed to a GET that joined the flight after the PUT.
func TestReadYourWriteDespitePreWriteFlight(t *testing.T) {
	var mu sync.Mutex
	exists := false
	getArrived := make(chan struct{}, 1)
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if r.Method == http.MethodPut {
			exists = true
		}
		ex := exists
		mu.Unlock()
		if r.Method == http.MethodGet {
			select {
			case getArrived <- struct{}{}:
			default:
			}
			if !ex {
				held(t, release) // the pre-write read is slow
				w.WriteHeader(http.StatusNotFound)
				fmt.Fprint(w, "absent")
				return
			}
		}
		fmt.Fprint(w, "present")
	})
	read := testRoute{Name: "client", Pattern: "/clients/{id}", TTL: time.Minute, Tags: []string{"client:{id}"}} // no negative_ttl
	write := testRoute{Name: "client-write", Methods: []string{"PUT"}, Pattern: "/clients/{id}", Invalidate: []string{"client:{id}"}}
	e := newEnv(t, up, []testRoute{read, write}, withL1Invalidator)

	first := make(chan string, 1)
	go func() { _, b := e.get("/clients/9"); first <- b }()
	await(t, getArrived) // the pre-write GET is at the upstream

	req, _ := http.NewRequest(http.MethodPut, e.front.URL+"/clients/9", strings.NewReader("x"))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("PUT: %d", resp.StatusCode)
	}

	// The write is answered; this read starts after it.
	second := make(chan *http.Response, 1)
	secondBody := make(chan string, 1)
	var joined atomic.Int64
	go func() { r, b := e.doCounted(http.MethodGet, "/clients/9", nil, &joined); second <- r; secondBody <- b }()
	waitFor(t, func() bool { return joined.Load() >= 1 }) // it waits on a flight
	close(release)
	if b := <-first; b != "absent" {
		t.Fatalf("pre-write GET = %q", b)
	}
	r2, b2 := <-second, <-secondBody
	if r2.StatusCode != 200 || b2 != "present" {
		t.Fatalf("GET after the PUT was answered = %d %q (Cache-Status %q), want 200 present",
			r2.StatusCode, b2, r2.Header.Get("Cache-Status"))
	}
}

// An oversized response is meant to stream through for everyone
// ("tooLarge: everyone streams it through instead"), but usable() rejects
// tooLarge flights, so every collapsed waiter first reads the whole body
// itself (a private fetch) and then streams it again: 2N upstream calls for
// N concurrent requests instead of N+1.
func TestOversizedWaitersStreamOnce(t *testing.T) {
	big := strings.Repeat("x", 2<<20) // MaxBodyBytes is 1 MiB in newEnv
	release := make(chan struct{})
	var first atomic.Bool
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if first.CompareAndSwap(false, true) {
			held(t, release) // the flight's call, held until every request waits on it
		}
		fmt.Fprint(w, big)
	})
	rt := testRoute{Name: "big", Pattern: "/big/{id}", TTL: time.Minute}
	e := newEnv(t, up, []testRoute{rt})
	var waiting atomic.Int64
	withWaiting(e, &waiting)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	const n = 4
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, b := e.get("/big/1"); len(b) != len(big) {
				t.Errorf("body length %d, want %d", len(b), len(big))
			}
		}()
	}
	waitFor(t, func() bool { return up.calls.Load() >= 1 && waiting.Load() >= n })
	close(release)
	wg.Wait()
	if c := up.calls.Load(); c > n+1 {
		t.Fatalf("upstream calls = %d for %d concurrent requests, want at most %d (one fetch + one stream each)", c, n, n+1)
	}
}

// tombstones.add sets live to len(tags), forgetting a purge-all tombstone
// that addAll counted. peerInvalidation calls Invalidated() with no tags
// for a key-only message (a peer's POST /purge?key=), which zeroes live, and
// stale() then skips every check: a fetch that began before the purge of
// everything is stored after it.
func TestPurgeAllTombstoneSurvivesKeyInvalidation(t *testing.T) {
	for _, keyOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("keyOnlyAfter=%v", keyOnly), func(t *testing.T) {
			arrived := make(chan struct{}, 1)
			release := make(chan struct{})
			var mu sync.Mutex
			n := 0
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				n++
				first := n == 1
				mu.Unlock()
				if first {
					arrived <- struct{}{}
					held(t, release)
					fmt.Fprint(w, "old")
					return
				}
				fmt.Fprint(w, "new")
			})
			e := newEnv(t, up, []testRoute{clientRoute})
			done := make(chan string, 1)
			go func() { _, b := e.get("/clients/1"); done <- b }()
			await(t, arrived)
			e.h.InvalidatedAll() // POST /purge?all=1 (purger.PurgeAll)
			e.l1.Clear()
			if keyOnly {
				e.h.Invalidated() // a peer's key-only message (peerInvalidation)
			}
			close(release)
			if b := <-done; b != "old" {
				t.Fatalf("pre-purge read = %q", b)
			}
			if r, b := e.get("/clients/1"); b != "new" {
				t.Fatalf("read after purge-all = %q (Cache-Status %q): the pre-purge fetch was stored", b, r.Header.Get("Cache-Status"))
			}
		})
	}
}

// The cached path rebuilds the upstream URL from the decoded r.URL.Path and
// drops RawPath (outgoing: u.RawPath = ""), so an encoded slash in a
// wildcard route reaches the upstream as a real "/": GET /files/a%2Fb is
// answered (and cached) with the upstream's /files/a/b. Pass-through
// (httputil.ReverseProxy) keeps the escaping.
func TestCachedPathKeepsEncodedSlash(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.RequestURI)
	})
	rt := testRoute{Name: "files", Pattern: "/files/*", TTL: time.Minute}
	e := newEnv(t, up, []testRoute{rt})
	if _, b := e.get("/files/a%2Fb"); b != "/files/a%2Fb" {
		t.Fatalf("upstream saw %q, want /files/a%%2Fb", b)
	}
}
