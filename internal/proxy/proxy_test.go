package proxy_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l1"
)

var clientRoute = testRoute{Name: "client", Methods: []string{"GET", "HEAD"}, Pattern: "/clients/{id}", TTL: time.Minute, NegativeTTL: 10 * time.Second, Tags: []string{"client:{id}"}}

func TestSecondGetIsL1Hit(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path":%q}`, r.URL.Path)
	})
	e := newEnv(t, up, []testRoute{clientRoute})
	r1, b1 := e.get("/clients/7")
	if cs := r1.Header.Get("Cache-Status"); !strings.Contains(cs, "fwd=miss") || !strings.Contains(cs, "stored") {
		t.Fatalf("first Cache-Status = %q, want fwd=miss; stored", cs)
	}
	r2, b2 := e.get("/clients/7")
	cs := r2.Header.Get("Cache-Status")
	if !strings.HasPrefix(cs, "sidecache; hit; ttl=") || !strings.Contains(cs, "detail=l1") {
		t.Fatalf("second Cache-Status = %q, want a hit from l1", cs)
	}
	if r2.Header.Get("Age") == "" {
		t.Error("hit without Age")
	}
	if b1 != b2 || b2 != `{"path":"/clients/7"}` {
		t.Fatalf("bodies %q / %q", b1, b2)
	}
	if n := up.calls.Load(); n != 1 {
		t.Fatalf("upstream calls = %d, want 1", n)
	}
}

func TestConcurrentColdGetsCoalesce(t *testing.T) {
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		held(t, release)
		fmt.Fprintf(w, "body-%d", time.Now().UnixNano())
	})
	e := newEnv(t, up, []testRoute{clientRoute})
	var waiting atomic.Int64
	withWaiting(e, &waiting)
	const n = 500
	bodies := make([]string, n)
	var wg sync.WaitGroup
	started := make(chan struct{}, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- struct{}{}
			_, bodies[i] = e.get("/clients/1")
		}()
	}
	for range n {
		<-started
	}
	// Every request waits on the flight before the upstream, which answers
	// only once released, answers.
	waitFor(t, func() bool { return up.calls.Load() >= 1 && waiting.Load() >= n })
	close(release)
	wg.Wait()
	if c := up.calls.Load(); c != 1 {
		t.Fatalf("upstream calls = %d, want 1", c)
	}
	for i := range bodies {
		if bodies[i] != bodies[0] || !strings.HasPrefix(bodies[0], "body-") {
			t.Fatalf("body %d = %q, want %q", i, bodies[i], bodies[0])
		}
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestCacheability: every bypass and uncacheable rule of the spec. Each case
// makes two identical requests; cached says whether the second must be
// answered without the upstream.
func TestCacheability(t *testing.T) {
	cases := []struct {
		name   string
		reqHdr http.Header
		handle func(w http.ResponseWriter, r *http.Request)
		cached bool
		status string // substring of the second Cache-Status
	}{
		{"plain 200", nil, ok200, true, "hit"},
		{"authorization bypasses", http.Header{"Authorization": {"Bearer x"}}, ok200, false, "fwd=bypass; fwd-status=200; detail=authorization"},
		{"cookie bypasses", http.Header{"Cookie": {"s=1"}}, ok200, false, "detail=cookie"},
		{"range bypasses", http.Header{"Range": {"bytes=0-1"}}, ok200, false, "detail=range"},
		{"client no-store bypasses", http.Header{"Cache-Control": {"no-store"}}, ok200, false, "detail=no-store"},
		{"set-cookie not stored", nil, withHeader("Set-Cookie", "a=b"), false, "fwd=miss"},
		{"set-cookie2 not stored", nil, withHeader("Set-Cookie2", `a="b"; Version="1"`), false, "fwd=miss"},
		{"no-store not stored", nil, withHeader("Cache-Control", "no-store"), false, "fwd=miss"},
		{"private not stored", nil, withHeader("Cache-Control", "private, max-age=60"), false, "fwd=miss"},
		{"upstream no-cache not stored", nil, withHeader("Cache-Control", "no-cache"), false, "fwd=miss"},
		{"vary star not stored", nil, withHeader("Vary", "*"), false, "fwd=miss"},
		{"5xx not stored", nil, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) }, false, "fwd=miss; fwd-status=500"},
		{"302 not stored", nil, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/x", http.StatusFound) }, false, "fwd-status=302"},
		{"404 stored under negative_ttl", nil, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, true, "hit"},
		{"301 stored", nil, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/x", http.StatusMovedPermanently) }, true, "hit"},
		{"204 stored", nil, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }, true, "hit"},
		{"oversized body streams through", nil, func(w http.ResponseWriter, r *http.Request) { w.Write(bytes.Repeat([]byte("x"), 2<<20)) }, false, "fwd=bypass; fwd-status=200; detail=hit-for-pass"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, tc.handle)
			e := newEnv(t, up, []testRoute{clientRoute}, func(o *proxyOptions, _ *l1.Store) { o.MaxBodyBytes = 1 << 20 })
			r1, b1 := e.do("GET", "/clients/1", tc.reqHdr)
			r2, b2 := e.do("GET", "/clients/1", tc.reqHdr)
			want := int64(2)
			if tc.cached {
				want = 1
			}
			if got := up.calls.Load(); got < want || tc.cached && got != want {
				t.Errorf("upstream calls = %d, want %d", got, want)
			}
			if b1 != b2 || r1.StatusCode != r2.StatusCode {
				t.Errorf("answers differ: %d %q / %d %q", r1.StatusCode, trunc(b1), r2.StatusCode, trunc(b2))
			}
			if cs := r2.Header.Get("Cache-Status"); !strings.Contains(cs, tc.status) {
				t.Errorf("second Cache-Status = %q, want it to contain %q", cs, tc.status)
			}
			if r2.Header.Get("Set-Cookie") != "" && tc.cached {
				t.Error("a stored answer carried Set-Cookie")
			}
		})
	}
}

type proxyOptions = proxyOptionsAlias

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func ok200(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprint(w, "hello")
}

func withHeader(k, v string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(k, v)
		fmt.Fprint(w, "hello")
	}
}

func TestOversizedBodyIsWholeAndUncached(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789"), 300_000) // 3 MB > 1 MiB limit
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.Write(big) })
	e := newEnv(t, up, []testRoute{clientRoute})
	for i := range 3 {
		_, b := e.get("/clients/1")
		if b != string(big) {
			t.Fatalf("request %d: body of %d bytes, want %d", i, len(b), len(big))
		}
	}
	if e.l1.Items() != 0 {
		t.Fatalf("l1 holds %d items, want 0", e.l1.Items())
	}
}

func TestClientNoCacheRefreshes(t *testing.T) {
	n := 0
	var mu sync.Mutex
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		fmt.Fprintf(w, "v%d", n)
		mu.Unlock()
	})
	rt := clientRoute
	rt.RequestNoCache = "refresh" // the default only in origin mode (nocache_test.go)
	e := newEnv(t, up, []testRoute{rt})
	_, b1 := e.get("/clients/1")
	r2, b2 := e.do("GET", "/clients/1", http.Header{"Cache-Control": {"no-cache"}})
	_, b3 := e.get("/clients/1")
	if b1 != "v1" || b2 != "v2" || b3 != "v2" {
		t.Fatalf("bodies %q %q %q, want v1 v2 v2", b1, b2, b3)
	}
	if cs := r2.Header.Get("Cache-Status"); !strings.Contains(cs, "fwd=request") || !strings.Contains(cs, "stored") {
		t.Fatalf("refresh Cache-Status = %q", cs)
	}
}

// TestVaryAcceptEncoding: gzip and identity clients never get each other's
// body, and equivalent Accept-Encoding values share one variant.
func TestVaryAcceptEncoding(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Vary", "Accept-Encoding")
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			gz := gzip.NewWriter(w)
			gz.Write([]byte("plain text"))
			gz.Close()
			return
		}
		fmt.Fprint(w, "plain text")
	})
	e := newEnv(t, up, []testRoute{clientRoute})
	gz := http.Header{"Accept-Encoding": {"gzip, deflate"}}
	gz2 := http.Header{"Accept-Encoding": {"deflate,GZIP"}}
	for i, step := range []struct {
		hdr     http.Header
		gzipped bool
		hit     bool
	}{
		{gz, true, false},
		{nil, false, false},
		{gz2, true, true},
		{nil, false, true},
		{http.Header{"Accept-Encoding": {"gzip;q=0, br;q=0"}}, false, true},
	} {
		r, b := e.do("GET", "/clients/1", step.hdr)
		if got := r.Header.Get("Content-Encoding") == "gzip"; got != step.gzipped {
			t.Fatalf("step %d: gzip = %v, want %v", i, got, step.gzipped)
		}
		if !step.gzipped && b != "plain text" {
			t.Fatalf("step %d: identity client got %q", i, trunc(b))
		}
		if step.gzipped {
			zr, err := gzip.NewReader(strings.NewReader(b))
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			plain, _ := io.ReadAll(zr)
			if string(plain) != "plain text" {
				t.Fatalf("step %d: gunzipped %q", i, plain)
			}
		}
		if hit := strings.Contains(r.Header.Get("Cache-Status"), "hit"); hit != step.hit {
			t.Fatalf("step %d: hit = %v (%s)", i, hit, r.Header.Get("Cache-Status"))
		}
	}
	if c := up.calls.Load(); c != 2 {
		t.Fatalf("upstream calls = %d, want 2 (one per variant)", c)
	}
}

// TestCompressedWithoutVary: an upstream that gzips without saying Vary
// still never reaches an identity client with a gzip body.
func TestCompressedWithoutVary(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			gz := gzip.NewWriter(w)
			gz.Write([]byte("x"))
			gz.Close()
			return
		}
		fmt.Fprint(w, "x")
	})
	e := newEnv(t, up, []testRoute{clientRoute})
	e.do("GET", "/clients/1", http.Header{"Accept-Encoding": {"gzip"}})
	r, b := e.get("/clients/1")
	if r.Header.Get("Content-Encoding") != "" || b != "x" {
		t.Fatalf("identity client got Content-Encoding %q body %q", r.Header.Get("Content-Encoding"), b)
	}
}

func TestHeadFromGetEntry(t *testing.T) {
	up := newUpstream(t, ok200)
	e := newEnv(t, up, []testRoute{clientRoute})
	e.get("/clients/1")
	r, b := e.do("HEAD", "/clients/1", nil)
	if b != "" || r.StatusCode != 200 || !strings.Contains(r.Header.Get("Cache-Status"), "hit") || r.Header.Get("Content-Length") != "5" {
		t.Fatalf("HEAD: %d %q %v", r.StatusCode, b, r.Header)
	}
	// And a HEAD miss fills the entry a GET then hits.
	r, _ = e.do("HEAD", "/clients/2", nil)
	r2, b2 := e.get("/clients/2")
	if !strings.Contains(r2.Header.Get("Cache-Status"), "hit") || b2 != "hello" {
		t.Fatalf("GET after HEAD miss: %q %q (HEAD was %q)", r2.Header.Get("Cache-Status"), b2, r.Header.Get("Cache-Status"))
	}
	if c := up.calls.Load(); c != 2 {
		t.Fatalf("upstream calls = %d, want 2", c)
	}
}

func TestConditionalFromCache(t *testing.T) {
	lm := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != "" {
			t.Error("conditional header reached the upstream")
		}
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Last-Modified", lm.Format(http.TimeFormat))
		fmt.Fprint(w, "hello")
	})
	e := newEnv(t, up, []testRoute{clientRoute})
	cases := []struct {
		name string
		hdr  http.Header
		want int
	}{
		{"etag match", http.Header{"If-None-Match": {`"v1"`}}, 304},
		{"weak etag match", http.Header{"If-None-Match": {`W/"v1", "other"`}}, 304},
		{"etag mismatch", http.Header{"If-None-Match": {`"v0"`}}, 200},
		{"ims equal", http.Header{"If-Modified-Since": {lm.Format(http.TimeFormat)}}, 304},
		{"ims before", http.Header{"If-Modified-Since": {lm.Add(-time.Hour).Format(http.TimeFormat)}}, 200},
		{"inm wins over ims", http.Header{"If-None-Match": {`"v0"`}, "If-Modified-Since": {lm.Format(http.TimeFormat)}}, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, b := e.do("GET", "/clients/1", tc.hdr)
			if r.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", r.StatusCode, tc.want)
			}
			if tc.want == 304 && (b != "" || r.Header.Get("ETag") != `"v1"`) {
				t.Fatalf("304 with body %q etag %q", b, r.Header.Get("ETag"))
			}
			if tc.want == 200 && b != "hello" {
				t.Fatalf("body %q", b)
			}
		})
	}
	if c := up.calls.Load(); c != 1 {
		t.Fatalf("upstream calls = %d, want 1", c)
	}
}

// TestCoalescingNeverLeaksPrivate: while one client's request is in flight,
// others collapsed onto it must not receive a response that set a cookie.
func TestCoalescingNeverLeaksPrivate(t *testing.T) {
	release := make(chan struct{})
	var seq sync.Mutex
	n := 0
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		seq.Lock()
		n++
		me := n
		seq.Unlock()
		if me == 1 {
			held(t, release)
		}
		w.Header().Set("Set-Cookie", fmt.Sprintf("session=%d", me))
		fmt.Fprintf(w, "for-%d", me)
	})
	e := newEnv(t, up, []testRoute{clientRoute})
	var waiting atomic.Int64
	withWaiting(e, &waiting)
	const n2 = 20
	cookies := make([]string, n2)
	bodies := make([]string, n2)
	var wg sync.WaitGroup
	for i := range n2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, b := e.get("/clients/1")
			cookies[i], bodies[i] = r.Header.Get("Set-Cookie"), b
		}()
	}
	waitFor(t, func() bool { return up.calls.Load() >= 1 && waiting.Load() >= n2 }) // all wait on the first call's flight
	close(release)
	wg.Wait()
	seen := map[string]bool{}
	for i := range bodies {
		if "session="+strings.TrimPrefix(bodies[i], "for-") != cookies[i] {
			t.Fatalf("response %d: body %q with cookie %q", i, bodies[i], cookies[i])
		}
		if seen[cookies[i]] {
			t.Fatalf("cookie %q handed to two clients", cookies[i])
		}
		seen[cookies[i]] = true
	}
}

func TestUpstreamFailures(t *testing.T) {
	slow := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(3 * time.Second):
		case <-r.Context().Done():
		}
		fmt.Fprint(w, "late")
	})
	refusedAddr := refusedAddr(t)
	refused := &upstream{}
	refused.Server = nil
	cases := []struct {
		name string
		path string
		up   *upstream
		url  string
		want int
	}{
		{"timeout on cached route", "/clients/1", slow, "", 504},
		{"timeout on pass-through", "/other", slow, "", 504},
		{"refused on cached route", "/clients/1", refused, "http://" + refusedAddr, 502},
		{"refused on pass-through", "/other", refused, "http://" + refusedAddr, 502},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvURL(t, tc.up, tc.url, []testRoute{clientRoute}, func(o *proxyOptions, _ *l1.Store) { o.Timeout = 300 * time.Millisecond })
			start := time.Now()
			r, b := e.get(tc.path)
			if r.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", r.StatusCode, tc.want)
			}
			if strings.Contains(b, "127.0.0.1") || strings.Contains(b, "dial") || strings.Contains(b, "late") {
				t.Fatalf("body leaks internals: %q", b)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("took %v, want about the 300ms timeout", d)
			}
		})
	}
}

func TestStaleIfError(t *testing.T) {
	var fail atomicBool
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "good")
	})
	rt := clientRoute
	rt.TTL, rt.StaleIfError = 50*time.Millisecond, time.Minute
	e := newEnv(t, up, []testRoute{rt})
	e.get("/clients/1")
	fail.Store(true)
	time.Sleep(80 * time.Millisecond)
	r, b := e.get("/clients/1")
	if b != "good" || r.StatusCode != 200 || !strings.Contains(r.Header.Get("Cache-Status"), "fwd=stale") {
		t.Fatalf("got %d %q %q, want the stale good body", r.StatusCode, b, r.Header.Get("Cache-Status"))
	}
	// Without a stale entry the failure shows.
	r, _ = e.get("/clients/2")
	if r.StatusCode != 503 {
		t.Fatalf("no stale entry: status %d, want the upstream's 503", r.StatusCode)
	}
}

func TestStaleWhileRevalidate(t *testing.T) {
	var mu sync.Mutex
	n := 0
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		me := n
		mu.Unlock()
		fmt.Fprintf(w, "v%d", me)
	})
	// The proxy's clock, moved past the TTL by the test: with a 50 ms TTL
	// on the wall clock, a loaded machine let the refreshed v2 go stale
	// before the test read it, and v3, v4… followed.
	c := &clock{}
	rt := clientRoute
	rt.TTL, rt.StaleWhileRevalidate = time.Minute, time.Hour
	e := newEnv(t, up, []testRoute{rt}, withClock(c))
	e.get("/clients/1")
	c.advance(rt.TTL + time.Second)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, b := e.get("/clients/1")
			if b != "v1" && b != "v2" {
				t.Errorf("body %q", b)
			}
			_ = r
		}()
	}
	wg.Wait()
	waitFor(t, func() bool {
		_, b := e.get("/clients/1")
		return b == "v2"
	})
	if c := up.calls.Load(); c != 2 {
		t.Fatalf("upstream calls = %d, want 2 (one background refresh)", c)
	}
}

func TestPassThroughStreamsAndForwards(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Forwarded-For") == "" || r.Header.Get("X-Forwarded-Host") == "" || r.Header.Get("X-Forwarded-Proto") != "http" {
			t.Errorf("forwarded headers missing: %v", r.Header)
		}
		if r.Header.Get("X-Secret") != "" || r.Header.Get("Connection") != "" && r.Header.Get("Connection") != "keep-alive" {
			t.Errorf("hop-by-hop headers forwarded: Connection %q, X-Secret %q", r.Header.Get("Connection"), r.Header.Get("X-Secret"))
		}
		w.Header().Set("X-Up", "1")
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.RequestURI(), body)
	})
	e := newEnv(t, up, []testRoute{clientRoute})
	for _, m := range []string{"GET", "POST", "DELETE"} {
		r, b := e.do(m, "/unrouted?q=1", http.Header{"Connection": {"X-Secret"}, "X-Secret": {"s"}})
		if b != m+" /unrouted?q=1 " || r.Header.Get("X-Up") != "1" {
			t.Fatalf("%s: %q", m, b)
		}
		if cs := r.Header.Get("Cache-Status"); !strings.Contains(cs, "fwd=bypass") {
			t.Fatalf("%s: Cache-Status %q", m, cs)
		}
	}
	if c := up.calls.Load(); c != 3 {
		t.Fatalf("upstream calls = %d, want 3 (nothing cached)", c)
	}
}

func TestWriteInvalidatesOwnL1(t *testing.T) {
	var mu sync.Mutex
	name := "old"
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == "PATCH" {
			b, _ := io.ReadAll(r.Body)
			name = string(b)
		}
		fmt.Fprint(w, name)
	})
	write := testRoute{Name: "client-write", Methods: []string{"PATCH", "PUT", "DELETE"}, Pattern: "/clients/{id}", Invalidate: []string{"client:{id}"}}
	e := newEnv(t, up, []testRoute{clientRoute, write}, withL1Invalidator)
	e.get("/clients/1")
	e.get("/clients/2")
	req, _ := http.NewRequest("PATCH", e.front.URL+"/clients/1", strings.NewReader("new"))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, b := e.get("/clients/1"); b != "new" {
		t.Fatalf("read after own write = %q, want new", b)
	}
	if r, _ := e.get("/clients/2"); !strings.Contains(r.Header.Get("Cache-Status"), "hit") {
		t.Fatal("another id's entry was dropped")
	}
}
