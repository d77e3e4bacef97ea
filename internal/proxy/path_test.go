package proxy_test

import (
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

// clock is a proxy clock the test moves forward; the tiers keep real time,
// so an entry the proxy judges stale is still held.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time           { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration)  { c.off.Add(int64(d)) }
func withClock(c *clock) envOpt           { return func(o *proxy.Options, _ *l1.Store) { o.Now = c.now } }
func cacheStatus(r *http.Response) string { return r.Header.Get("Cache-Status") }

// The upstream fails while a stale copy exists for one variant only: a
// client of another variant (or one that does not accept the stored
// content-coding), collapsed onto the same flight, must get the failure,
// never the other variant's body.
//
// The tiers are L2 only, so the lookup before the flight finds no variants
// marker to key the flight by variant: both requests wait on the URL's one
// flight, whose fill finds the prime variant's stale copy (flight.stale).
// What keeps it from the other client is the fit rule on that copy
// (exchange.join: x.answers(f.stale, needIfError)): its variant-key clause
// for Accept-Language, AcceptsStored for a coding the client refuses. The
// flight's 503 itself carries no Vary and answers both, so the join check
// is not what this test guards. up.calls == 2 at the end proves the
// collapse: the other client got the flight's 503 without a fetch of its
// own.
func TestStaleIfErrorServesOnlyItsOwnVariant(t *testing.T) {
	for _, tt := range []struct {
		name       string
		vary       string
		hdr        string
		prime, bad string
		enc        bool
	}{
		{name: "language", vary: "Accept-Language", hdr: "Accept-Language", prime: "en", bad: "fr"},
		{name: "encoding", vary: "Accept-Encoding", hdr: "Accept-Encoding", prime: "gzip", bad: "identity", enc: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFailingFront(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Vary", tt.vary)
				if tt.enc && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
					w.Header().Set("Content-Encoding", "gzip")
				}
				fmt.Fprint(w, "v="+r.Header.Get(tt.hdr))
			})
			e, up, c, hold := f.e, f.up, f.c, f.hold
			failing := &f.failing
			if resp, b := e.do("GET", "/greet/1", http.Header{tt.hdr: {tt.prime}}); resp.StatusCode != 200 || !strings.Contains(cacheStatus(resp), "stored") {
				t.Fatalf("priming: %d %q %q", resp.StatusCode, b, cacheStatus(resp))
			}
			c.advance(2 * time.Second) // stale, within stale-if-error
			failing.Store(true)
			lead := make(chan string, 1)
			go func() {
				r, b := e.do("GET", "/greet/1", http.Header{tt.hdr: {tt.prime}})
				lead <- fmt.Sprint(r.StatusCode, " ", b, " ", cacheStatus(r))
			}()
			waitFor(t, func() bool { return up.calls.Load() == 2 }) // the leader's fetch is held
			other := make(chan string, 1)
			var joined atomic.Int64
			go func() {
				r, b := e.doCounted("GET", "/greet/1", http.Header{tt.hdr: {tt.bad}}, &joined)
				other <- fmt.Sprint(r.StatusCode, " ", b, " ", cacheStatus(r))
			}()
			waitFor(t, func() bool { return joined.Load() >= 1 }) // it waits on the held flight
			close(hold)
			if got := <-lead; !strings.HasPrefix(got, "200 v="+tt.prime+" ") || !strings.Contains(got, "stale-if-error") {
				t.Errorf("own variant got %q, want the stale copy", got)
			}
			if got := <-other; !strings.HasPrefix(got, "503 ") || strings.Contains(got, "v="+tt.prime) || strings.Contains(got, "fwd=stale") {
				t.Errorf("other variant got %q, want the upstream's 503", got)
			}
			if n := up.calls.Load(); n != 2 {
				t.Errorf("upstream calls = %d, want 2: the other client did not collapse onto the leader's flight", n)
			}
		})
	}
}

// An L2 entry inside its stale-while-revalidate window is served at once,
// and refreshed once in the background: the client does not wait for the
// upstream (here held until the client has its answer).
func TestStaleWhileRevalidateFromSharedTier(t *testing.T) {
	var n atomic.Int64
	hold := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > 1 {
			held(t, hold)
		}
		fmt.Fprintf(w, "v%d", n.Load())
	})
	c := &clock{}
	rt := testRoute{Name: "c", Pattern: "/c/{id}", TTL: time.Second, StaleWhileRevalidate: time.Hour}
	e := newEnv(t, up, []testRoute{rt}, withSharedTierOnly, withClock(c))
	defer close(hold)
	e.get("/c/1")
	c.advance(2 * time.Second)
	resp, body := e.get("/c/1") // would block on the held upstream if it waited
	if body != "v1" || !strings.Contains(cacheStatus(resp), "fwd=stale") || !strings.Contains(cacheStatus(resp), "stale-while-revalidate") {
		t.Fatalf("got %q %q, want the stale copy at once", body, cacheStatus(resp))
	}
	for range 5 {
		e.get("/c/1") // a burst of stale hits starts no second refresh
	}
	waitFor(t, func() bool { return up.calls.Load() == 2 })
	time.Sleep(20 * time.Millisecond)
	if got := up.calls.Load(); got != 2 {
		t.Fatalf("upstream calls = %d, want 2 (prime + one background refresh)", got)
	}
}

// A body over max_body_bytes costs one upstream fetch per client request:
// the buffered prefix is streamed, then the rest, and nothing is stored.
func TestLargeBodyFetchedOncePerClient(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 128<<10) // 2 MiB
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, big) })
	rt := testRoute{Name: "big", Pattern: "/big/{id}", TTL: time.Minute}
	e := newEnv(t, up, []testRoute{rt}) // max_body_bytes 1 MiB
	resp, body := e.get("/big/1")
	if body != big || !strings.Contains(cacheStatus(resp), "too-large") {
		t.Fatalf("got %d bytes, %q", len(body), cacheStatus(resp))
	}
	if got := up.calls.Load(); got != 1 {
		t.Fatalf("one client request made %d upstream fetches", got)
	}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, b := e.get(fmt.Sprintf("/big/%d", 10+i%2)); b != big {
				t.Errorf("client %d got %d bytes", i, len(b))
			}
		}()
	}
	wg.Wait()
	if got := up.calls.Load(); got > 7 {
		t.Fatalf("7 client requests made %d upstream fetches", got)
	}
}

// Cache-Status says "stored" only when a tier accepted the entry: an L1
// too small for it refuses it.
func TestStoredOnlyWhenATierAccepted(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("h", 100<<10))
		fmt.Fprint(w, "ok")
	})
	rt := testRoute{Name: "c", Pattern: "/c/{id}", TTL: time.Minute}
	e := newEnv(t, up, []testRoute{rt}, func(o *proxy.Options, _ *l1.Store) {
		small, err := l1.New(l1.Options{MaxBytes: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(small.Close)
		o.Cache = cache.NewTiered(small, nil, cache.TieredOptions{})
	})
	resp, _ := e.get("/c/1")
	if cs := cacheStatus(resp); strings.Contains(cs, "stored") {
		t.Fatalf("Cache-Status %q claims stored", cs)
	}
	if resp, _ := e.get("/c/1"); !strings.Contains(cacheStatus(resp), "fwd=miss") {
		t.Fatalf("second request: %q, want a miss", cacheStatus(resp))
	}
}

// A response whose header block alone is over max_body_bytes is answered
// but not kept.
func TestHugeHeaderBlockNotStored(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("h", 4<<10))
		fmt.Fprint(w, "ok")
	})
	rt := testRoute{Name: "c", Pattern: "/c/{id}", TTL: time.Minute}
	e := newEnv(t, up, []testRoute{rt}, func(o *proxy.Options, _ *l1.Store) { o.MaxBodyBytes = 1 << 10 })
	for i := range 2 {
		resp, body := e.get("/c/1")
		if body != "ok" || strings.Contains(cacheStatus(resp), "stored") || strings.Contains(cacheStatus(resp), "hit") {
			t.Fatalf("request %d: %q %q", i, body, cacheStatus(resp))
		}
	}
}

// A cache key longer than max_key_bytes passes through uncached.
func TestLongKeyPassesThrough(t *testing.T) {
	up := newUpstream(t, ok200)
	rt := testRoute{Name: "c", Pattern: "/c/{id}", TTL: time.Minute}
	e := newEnv(t, up, []testRoute{rt}, func(o *proxy.Options, _ *l1.Store) { o.MaxKeyBytes = 256 })
	long := "/c/1?q=" + strings.Repeat("x", 300)
	for range 2 {
		resp, _ := e.get(long)
		if cs := cacheStatus(resp); !strings.Contains(cs, "fwd=bypass") || !strings.Contains(cs, "key-too-long") {
			t.Fatalf("Cache-Status %q", cs)
		}
	}
	if got := up.calls.Load(); got != 2 {
		t.Fatalf("upstream calls = %d, want 2", got)
	}
	if resp, _ := e.get("/c/1?q=short"); !strings.Contains(cacheStatus(resp), "stored") {
		t.Fatalf("short key: %q", cacheStatus(resp))
	}
}

// A client collapsed onto another variant's failed flight still gets its
// own variant's stale copy (stale_if_error: "serve stale when the upstream
// fails"): the flight's stale copy is the leader's variant, which does not
// answer it, so it looks up its own. L2 only, so both requests key the
// URL's one flight (see TestStaleIfErrorServesOnlyItsOwnVariant).
func TestStaleIfErrorJoinerGetsItsOwnStaleVariant(t *testing.T) {
	f := newFailingFront(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Vary", "Accept-Language")
		fmt.Fprint(w, "v="+r.Header.Get("Accept-Language"))
	})
	e, up, c, hold := f.e, f.up, f.c, f.hold
	failing := &f.failing
	for _, lang := range []string{"en", "fr"} {
		if resp, b := e.do("GET", "/greet/1", http.Header{"Accept-Language": {lang}}); b != "v="+lang || !strings.Contains(cacheStatus(resp), "stored") {
			t.Fatalf("priming %s: %q %q", lang, b, cacheStatus(resp))
		}
	}
	c.advance(2 * time.Second) // both stale, within stale-if-error
	failing.Store(true)
	lead := make(chan string, 1)
	go func() {
		r, b := e.do("GET", "/greet/1", http.Header{"Accept-Language": {"en"}})
		lead <- fmt.Sprint(r.StatusCode, " ", b, " ", cacheStatus(r))
	}()
	waitFor(t, func() bool { return up.calls.Load() == 3 }) // the leader's fetch is held
	other := make(chan string, 1)
	var joined atomic.Int64
	go func() {
		r, b := e.doCounted("GET", "/greet/1", http.Header{"Accept-Language": {"fr"}}, &joined)
		other <- fmt.Sprint(r.StatusCode, " ", b, " ", cacheStatus(r))
	}()
	waitFor(t, func() bool { return joined.Load() >= 1 }) // it waits on the held flight
	close(hold)
	if got := <-lead; !strings.HasPrefix(got, "200 v=en ") || !strings.Contains(got, "stale-if-error") {
		t.Errorf("en got %q, want its stale copy", got)
	}
	if got := <-other; !strings.HasPrefix(got, "200 v=fr ") || !strings.Contains(got, "stale-if-error") {
		t.Errorf("fr got %q, want its own stale copy", got)
	}
	if n := up.calls.Load(); n != 3 {
		t.Errorf("upstream calls = %d, want 3: fr did not collapse onto en's flight", n)
	}
}

// failingFront is a front on route greet (ttl 1s, stale-if-error 1h), L2
// only and on its own clock, whose upstream answers with ok until failing
// is set, and from then on waits for hold to close and answers 503: a
// flight held in its failing fetch while other requests join it.
type failingFront struct {
	e       *env
	up      *upstream
	c       *clock
	failing atomic.Bool
	hold    chan struct{}
}

func newFailingFront(t *testing.T, ok http.HandlerFunc) *failingFront {
	t.Helper()
	f := &failingFront{c: &clock{}, hold: make(chan struct{})}
	f.up = newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if f.failing.Load() {
			held(t, f.hold)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		ok(w, r)
	})
	rt := testRoute{Name: "greet", Pattern: "/greet/{id}", TTL: time.Second, StaleIfError: time.Hour, ForwardAll: true}
	f.e = newEnv(t, f.up, []testRoute{rt}, withSharedTierOnly, withClock(f.c))
	return f
}
