package proxy_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/proxy"
)

// withJoinCount wraps the front server's handler so that joined counts the
// requests that have joined a flight (joinCtx: the first Done on a cached
// request's context is coalesce.Do's wait) and finished those the handler
// is done with.
func withJoinCount(e *env, joined, finished *atomic.Int64) {
	e.front = edgeServer(e.t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.h.ServeHTTP(w, r.WithContext(joinCtx{r.Context(), joined}))
		finished.Add(1)
	}), nil)
}

// letters are n pseudo-random lowercase letters: gzip takes them to about
// 60 %, not to nothing.
func letters(n int) string {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = 'a' + byte(x%26)
	}
	return string(b)
}

func gzipString(s string) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return b.String()
}

// Issue 20.1: an answer over max_body_bytes — private, with a Set-Cookie
// minted for the caller, gzipped because the caller accepts it — went to
// whichever collapsed client claimed it first, past the fit rule. It must
// reach only the client whose request fetched it; the others fetch for
// themselves. Each round has one fetcher (gzip) and three collapsed
// clients (no Accept-Encoding). In even rounds the fetcher hangs up while
// its fetch is under way, which before the fix left the body to the first
// collapsed client every time; in odd rounds it stays.
func TestLargePrivateAnswerOnlyToItsFetcher(t *testing.T) {
	var calls atomic.Int64
	hold := make(chan chan struct{}, 1)
	arrived := make(chan string, 1)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		who := fmt.Sprintf("call-%d", calls.Add(1))
		gz := r.Header.Get("Accept-Encoding") == "gzip"
		select {
		case release := <-hold: // the round's first call, the fetcher's: held until the others joined
			arrived <- who
			held(t, release)
		default:
		}
		body := who + "." + letters(4<<10) // gzipped, still over the bound
		w.Header().Set("Cache-Control", "private")
		w.Header().Set("Set-Cookie", "sid="+who)
		w.Header().Set("Vary", "Accept-Encoding")
		if gz {
			w.Header().Set("Content-Encoding", "gzip")
			body = gzipString(body)
		}
		fmt.Fprint(w, body)
	})
	rt := testRoute{Name: "big", Pattern: "/big/{id}", TTL: time.Minute}
	e := newEnv(t, up, []testRoute{rt}, func(o *proxy.Options, _ *l1.Store) { o.MaxBodyBytes = 1 << 10 })
	var joined, finished atomic.Int64
	withJoinCount(e, &joined, &finished)
	for round := range 6 {
		path := fmt.Sprintf("/big/%d", round)
		leaves := round%2 == 0
		release := make(chan struct{})
		hold <- release
		joined.Store(0)
		finished.Store(0)
		ctx, hangUp := context.WithCancel(context.Background())
		fetcher := make(chan *http.Response, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", e.front.URL+path, nil)
			req.Header.Set("Accept-Encoding", "gzip")
			resp, err := client.Do(req)
			if err != nil {
				fetcher <- nil
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			fetcher <- resp
		}()
		fetcherWho := <-arrived
		const others = 3
		var wg sync.WaitGroup
		for range others {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, b := e.do("GET", path, nil) // no Accept-Encoding: identity only
				who, _, _ := strings.Cut(b, ".")
				if ce := resp.Header.Get("Content-Encoding"); ce != "" || who == fetcherWho || resp.Header.Get("Set-Cookie") != "sid="+who {
					t.Errorf("round %d: a collapsed client got Content-Encoding %q, a body of %.10q, Set-Cookie %q (the fetch was %s; %s)",
						round, ce, who, resp.Header.Get("Set-Cookie"), fetcherWho, cacheStatus(resp))
				}
			}()
		}
		waitFor(t, func() bool { return joined.Load() >= others })
		if leaves {
			hangUp()
			waitFor(t, func() bool { return finished.Load() >= 1 }) // the sidecar saw it leave
		}
		close(release)
		wg.Wait()
		resp := <-fetcher
		if !leaves && (resp == nil || resp.Header.Get("Set-Cookie") != "sid="+fetcherWho || resp.Header.Get("Content-Encoding") != "gzip") {
			t.Errorf("round %d: the fetcher did not get its own answer", round)
		}
		hangUp()
		if t.Failed() {
			return
		}
	}
}

// Issue 20.9: an answer that varies on a header the route had not yet
// learned was judged by what the route forwards when it arrived, not by
// what its fetch sent. A globex request leaves without X-Tenant; before
// its answer arrives, another request teaches the route X-Tenant; the
// answer (the default tenant's page) was then stored as globex's variant.
// It must be asked for again with the header, and never kept for globex.
func TestLearnedVaryJudgedByWhatItsFetchSent(t *testing.T) {
	hold := make(chan struct{})
	arrived := make(chan struct{}, 1)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/page/1" && r.Header.Get("X-Tenant") == "" {
			arrived <- struct{}{}
			// Or until the sidecar gives up the call: a test that fails
			// before close(hold) must not leave this handler, and the
			// server's Close, waiting forever.
			select {
			case <-hold:
			case <-r.Context().Done():
			}
		}
		w.Header().Set("Vary", "X-Tenant")
		fmt.Fprint(w, "tenant="+r.Header.Get("X-Tenant"))
	})
	rt := testRoute{Name: "page", Pattern: "/page/{id}", TTL: time.Minute}
	e := newEnv(t, up, []testRoute{rt})
	globex := http.Header{"X-Tenant": {"globex"}}
	first := make(chan string, 1)
	go func() {
		resp, b := e.do("GET", "/page/1", globex)
		first <- b + " (" + cacheStatus(resp) + ")"
	}()
	await(t, arrived) // sent without X-Tenant: not learned yet
	if _, b := e.do("GET", "/page/2", http.Header{"X-Tenant": {"acme"}}); b != "tenant=acme" {
		t.Fatalf("teaching request: %q", b)
	}
	close(hold)
	if got := <-first; !strings.HasPrefix(got, "tenant=globex ") {
		t.Errorf("globex's first request got %s", got)
	}
	resp, b := e.do("GET", "/page/1", globex)
	if b != "tenant=globex" {
		t.Fatalf("globex's next request got %q (%s): the default tenant's page was stored as globex's", b, cacheStatus(resp))
	}
}

// Issue 20.12: one Accept-Encoding: identity request, whose identity body
// is over max_body_bytes, made the URL hit-for-pass for every client, the
// gzip ones included, whose answer fits. Hit-for-pass is per variant.
func TestHitForPassPerVariant(t *testing.T) {
	big := strings.Repeat("abcdefgh", 512) // 4 KiB, over the 2 KiB bound; gzip: tiny
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Vary", "Accept-Encoding")
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			fmt.Fprint(w, gzipString(big))
			return
		}
		fmt.Fprint(w, big)
	})
	rt := testRoute{Name: "doc", Pattern: "/doc/{id}", TTL: time.Minute}
	e := newEnv(t, up, []testRoute{rt}, func(o *proxy.Options, _ *l1.Store) { o.MaxBodyBytes = 2 << 10 })
	identity := http.Header{"Accept-Encoding": {"identity"}}
	gz := http.Header{"Accept-Encoding": {"gzip"}}
	if resp, b := e.do("GET", "/doc/1", identity); b != big || !strings.Contains(cacheStatus(resp), "too-large") {
		t.Fatalf("identity: %d bytes (%s)", len(b), cacheStatus(resp))
	}
	if resp, _ := e.do("GET", "/doc/1", gz); !strings.Contains(cacheStatus(resp), "stored") {
		t.Fatalf("gzip after an identity too-large: %s, want fetched and stored", cacheStatus(resp))
	}
	if resp, _ := e.do("GET", "/doc/1", gz); !strings.Contains(cacheStatus(resp), "hit") {
		t.Fatalf("gzip again: %s, want a hit", cacheStatus(resp))
	}
	if resp, _ := e.do("GET", "/doc/1", identity); !strings.Contains(cacheStatus(resp), "hit-for-pass") {
		t.Fatalf("identity again: %s, want hit-for-pass (its own variant is remembered)", cacheStatus(resp))
	}
	if n := up.calls.Load(); n != 3 {
		t.Fatalf("upstream calls = %d, want 3 (identity, gzip, identity passed through)", n)
	}
}
