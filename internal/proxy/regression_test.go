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

// slowStore is a real store whose reads take a Redis-like round trip, long
// enough that concurrent requests reliably meet in one flight.
type slowStore struct {
	cache.Store
	d time.Duration
}

func (s slowStore) Get(ctx context.Context, key string) (*cache.Entry, bool, error) {
	time.Sleep(s.d)
	return s.Store.Get(ctx, key)
}

// withSharedTierOnly models `l1.max_bytes: 0` with an L2: LookupLocal
// always misses, and the flight leader reads the shared tier.
func withSharedTierOnly(d time.Duration) envOpt {
	return func(o *proxy.Options, s *l1.Store) {
		o.Cache = cache.NewTiered(nil, slowStore{Store: s, d: d}, cache.TieredOptions{})
	}
}

// Two variants of one URL (Vary: Accept-Language) are in the shared tier.
// A request for "en" leads a flight that finds its variant in the cache; a
// request for "fr" collapsed onto that flight must not get the "en" body.
// usable() only checks Vary when the flight fetched from upstream (f.vary
// is never set on a flight that found its entry in the cache).
func TestCollapsedOntoCacheHitGetsOwnVariant(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Vary", "Accept-Language")
		fmt.Fprint(w, "lang="+r.Header.Get("Accept-Language"))
	})
	// forward_headers: all, so priming costs one call per variant (the
	// keyed default spends one more, once, learning the Vary'd header:
	// see TestVaryOnWithheldHeaderIsLearned).
	rt := testRoute{Name: "greet", Pattern: "/greet/{id}", TTL: time.Minute, ForwardAll: true}
	e := newEnv(t, up, []testRoute{rt}, withSharedTierOnly(150*time.Millisecond))
	for _, lang := range []string{"en", "fr"} {
		if _, b := e.do("GET", "/greet/1", http.Header{"Accept-Language": {lang}}); b != "lang="+lang {
			t.Fatalf("priming %s: %q", lang, b)
		}
	}
	if n := up.calls.Load(); n != 2 {
		t.Fatalf("priming made %d upstream calls, want 2", n)
	}
	var wg sync.WaitGroup
	bodies := map[string]string{}
	var mu sync.Mutex
	for i, lang := range []string{"en", "fr"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 50 * time.Millisecond) // en leads, fr joins
			_, b := e.do("GET", "/greet/1", http.Header{"Accept-Language": {lang}})
			mu.Lock()
			bodies[lang] = b
			mu.Unlock()
		}()
	}
	wg.Wait()
	for lang, b := range bodies {
		if b != "lang="+lang {
			t.Errorf("Accept-Language %s got %q (another variant)", lang, b)
		}
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
			<-release
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
	<-arrived
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
				<-release // the pre-write read is slow
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
	<-getArrived // the pre-write GET is at the upstream

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
			<-release // the flight's call, held until every request waits on it
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
					<-release
					fmt.Fprint(w, "old")
					return
				}
				fmt.Fprint(w, "new")
			})
			e := newEnv(t, up, []testRoute{clientRoute})
			done := make(chan string, 1)
			go func() { _, b := e.get("/clients/1"); done <- b }()
			<-arrived
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
