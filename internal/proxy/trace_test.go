package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/tracing"
)

// tracedEnv is env with tracing on: an SDK provider recording into memory,
// and the front server wrapped as internal/server wraps it. joined counts
// the requests waiting in the proxy (see joinCtx).
type tracedEnv struct {
	*env
	exp    *tracetest.InMemoryExporter
	joined atomic.Int64
}

func newTracedEnv(t *testing.T, up *upstream, routes []testRoute) *tracedEnv {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	te := &tracedEnv{exp: exp}
	te.env = newEnv(t, up, routes, func(o *proxyOptions, _ *l1.Store) { o.TracerProvider = tp })
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		te.h.ServeHTTP(w, r.WithContext(joinCtx{r.Context(), &te.joined}))
	})
	te.front = edgeServer(t, tracing.Handler(inner, tp), nil)
	return te
}

// joinCtx counts the calls of Done on a request's context. On the cached
// path the first is coalesce.Do's wait, after the request has joined its
// flight: N counted is "all N have joined", with no sleep.
type joinCtx struct {
	context.Context
	n *atomic.Int64
}

func (c joinCtx) Done() <-chan struct{} {
	c.n.Add(1)
	return c.Context.Done()
}

// spans waits until n server spans have ended (the server ends a request's
// span after the client has read the answer) and returns every span.
func (te *tracedEnv) spans(t *testing.T, n int) tracetest.SpanStubs {
	t.Helper()
	waitFor(t, func() bool { return len(named(te.exp.GetSpans(), kindServer)) >= n })
	return te.exp.GetSpans()
}

const kindServer = "\x00server" // named's pseudo-name for the request spans

// named is the spans called name (kindServer: of kind server).
func named(ss tracetest.SpanStubs, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range ss {
		if s.Name == name || name == kindServer && s.SpanKind == trace.SpanKindServer {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, k string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == k {
			return a.Value.Emit()
		}
	}
	return ""
}

// linksTo counts the spans with a link to target, of the given kind.
func linksTo(ss tracetest.SpanStubs, target trace.SpanContext, kind string) int {
	n := 0
	for _, s := range ss {
		for _, l := range s.Links {
			set := attribute.NewSet(l.Attributes...)
			v, _ := set.Value("sidecache.link")
			if l.SpanContext.SpanID() == target.SpanID() && l.SpanContext.TraceID() == target.TraceID() && v.AsString() == kind {
				n++
			}
		}
	}
	return n
}

// TestTraceCoalescedMiss: N clients of one cold key make one upstream
// call, under one fill; each of the N-1 collapsed requests links to that
// call's span, and the upstream saw it as its parent (traceparent).
func TestTraceCoalescedMiss(t *testing.T) {
	const n = 8
	release := make(chan struct{})
	var parent atomic.Value
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		parent.Store(r.Header.Get("Traceparent"))
		held(t, release)
		fmt.Fprint(w, "cold")
	})
	te := newTracedEnv(t, up, []testRoute{clientRoute})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { te.get("/clients/1") })
	}
	waitFor(t, func() bool { return te.joined.Load() >= n })
	close(release)
	wg.Wait()
	ss := te.spans(t, n)

	fetches, fills := named(ss, "upstream.fetch"), named(ss, "cache.fill")
	if len(fetches) != 1 || len(fills) != 1 || up.calls.Load() != 1 {
		t.Fatalf("%d upstream.fetch and %d cache.fill spans, %d upstream calls; want 1 each", len(fetches), len(fills), up.calls.Load())
	}
	fetch, fill := fetches[0], fills[0]
	if fetch.Parent.SpanID() != fill.SpanContext.SpanID() || fetch.SpanKind != trace.SpanKindClient {
		t.Errorf("upstream.fetch is not the fill's client child: parent %s, kind %s", fetch.Parent.SpanID(), fetch.SpanKind)
	}
	if got := attr(fetch, "http.response.status_code"); got != "200" {
		t.Errorf("upstream.fetch status_code = %q", got)
	}
	servers := named(ss, kindServer)
	leaders := 0
	for _, s := range servers {
		if s.SpanContext.SpanID() == fill.Parent.SpanID() {
			leaders++
		}
		if s.Name != "GET /clients/{id}" || attr(s, "sidecache.route") != "client" {
			t.Errorf("request span %q route %q, want GET /clients/{id} on client", s.Name, attr(s, "sidecache.route"))
		}
	}
	if leaders != 1 {
		t.Errorf("%d request spans are the fill's parent, want 1 (the leader)", leaders)
	}
	if got := linksTo(servers, fetch.SpanContext, "collapsed"); got != n-1 {
		t.Errorf("%d request spans link to the upstream call, want %d", got, n-1)
	}
	want := fmt.Sprintf("00-%s-%s-01", fetch.SpanContext.TraceID(), fetch.SpanContext.SpanID())
	if got, _ := parent.Load().(string); got != want {
		t.Errorf("upstream saw traceparent %q, want the fetch span %q", got, want)
	}
	for _, s := range servers {
		if cs := attr(s, string(tracing.CacheStatusKey)); !strings.Contains(cs, "fwd=miss") {
			t.Errorf("request span Cache-Status %q, want a miss", cs)
		}
	}
}

// TestTraceBatch: the ids of one batch make one bulk call, and every
// request of the batch links to its span.
func TestTraceBatch(t *testing.T) {
	const n = 4
	o := newBulkOrigin(t, nil)
	// The batch leaves when full: max_size n, and a window no test waits out.
	te := newTracedEnv(t, o.upstream, []testRoute{userRoute(n, time.Minute)})
	for _, a := range fetchAll(te.env, userPaths(1, n), nil) {
		if a.err != nil || a.code != 200 {
			t.Fatalf("answer %d %v", a.code, a.err)
		}
	}
	ss := te.spans(t, n)
	bulks := named(ss, "upstream.bulk")
	if len(bulks) != 1 || len(o.snapshot()) != 1 {
		t.Fatalf("%d upstream.bulk spans for %d bulk calls, want 1 and 1", len(bulks), len(o.snapshot()))
	}
	if got := attr(bulks[0], "sidecache.batch.size"); got != fmt.Sprint(n) {
		t.Errorf("batch.size = %s, want %d", got, n)
	}
	if got := linksTo(named(ss, kindServer), bulks[0].SpanContext, "batch"); got != n {
		t.Errorf("%d request spans link to the bulk call, want %d", got, n)
	}
	if f := named(ss, "upstream.fetch"); len(f) != 0 {
		t.Errorf("%d per-id upstream.fetch spans, want 0", len(f))
	}
}

// TestTraceSpans: the spans one request makes on each path, with the cache
// lookups per tier and what they found.
func TestTraceSpans(t *testing.T) {
	type lookup struct{ tier, result string }
	cases := []struct {
		name    string
		warm    bool
		path    string
		lookups []lookup // in the order they ended
		fetches int
		stores  int
	}{
		{name: "cold miss", path: "/clients/1", lookups: []lookup{{"l1", "miss"}, {"l2", "miss"}}, fetches: 1, stores: 1},
		{name: "l1 hit", warm: true, path: "/clients/1", lookups: []lookup{{"l1", "hit"}}},
		{name: "pass-through", path: "/other", fetches: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var parent atomic.Value
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				parent.Store(r.Header.Get("Traceparent"))
				fmt.Fprint(w, "x")
			})
			te := newTracedEnv(t, up, []testRoute{clientRoute})
			if tc.warm {
				te.get(tc.path)
				te.spans(t, 1)
				te.exp.Reset()
			}
			calls := up.calls.Load()
			te.get(tc.path)
			ss := te.spans(t, 1)
			var got []lookup
			for _, s := range named(ss, "cache.lookup") {
				got = append(got, lookup{attr(s, "sidecache.cache.tier"), attr(s, "sidecache.cache.result")})
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.lookups) {
				t.Errorf("lookups %v, want %v", got, tc.lookups)
			}
			if f := len(named(ss, "upstream.fetch")); f != tc.fetches {
				t.Errorf("%d upstream.fetch spans, want %d", f, tc.fetches)
			}
			if s := len(named(ss, "cache.store")); s != tc.stores {
				t.Errorf("%d cache.store spans, want %d", s, tc.stores)
			}
			if tc.warm && up.calls.Load() != calls {
				t.Errorf("the hit called the upstream")
			}
			if !tc.warm {
				// The upstream's parent is a span of this trace: the fetch
				// on the cached path, the request span on pass-through.
				server := named(ss, kindServer)[0]
				tp, _ := parent.Load().(string)
				if !strings.HasPrefix(tp, "00-"+server.SpanContext.TraceID().String()+"-") {
					t.Errorf("upstream traceparent %q not in the request's trace %s", tp, server.SpanContext.TraceID())
				}
			}
		})
	}
}

// BenchmarkL1HitTraced is BenchmarkL1Hit with tracing on and every trace
// sampled (spans are recorded, then dropped: no exporter), through the
// server-side middleware: the cost of tracing a hit. Run:
// go test -run - -bench 'L1Hit' -benchmem ./internal/proxy
func BenchmarkL1HitTraced(b *testing.B) {
	up := newUpstream(b, func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, 512)) })
	tp := sdktrace.NewTracerProvider()
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	e := newEnv(b, up, []testRoute{clientRoute}, func(o *proxyOptions, _ *l1.Store) { o.TracerProvider = tp })
	h := tracing.Handler(e.h, tp)
	e.get("/clients/42")
	req := httptest.NewRequest("GET", e.front.URL+"/clients/42", nil)
	w := &discard{h: make(http.Header, 8)}
	h.ServeHTTP(w, req)
	if !strings.Contains(w.h.Get("Cache-Status"), "hit") || up.calls.Load() != 1 {
		b.Fatalf("not a hit: %v", w.h)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, req)
	}
}
