package proxy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/proxy"
	"github.com/sidecache/sidecache/internal/route"
)

// userRoute is the spec's "user" batch route with the given window. It is a
// function so each test gets its own *route.Batch to adjust.
func userRoute(maxSize int, maxWait time.Duration) testRoute {
	return testRoute{
		Name: "user", Pattern: "/users/{id}", TTL: time.Minute,
		Key:   cachekey.Options{AllQuery: true},
		Batch: &route.Batch{Path: "/users", Param: "ids", IDField: "id", MaxSize: maxSize, MaxWait: maxWait},
	}
}

// bulkCall is one call the origin's bulk endpoint received.
type bulkCall struct {
	ids    []string
	header http.Header
}

// bulkOrigin is an httptest upstream with a bulk endpoint (GET /users?ids=)
// that records every call, and counts per-ID calls, which a batched route
// must never make.
type bulkOrigin struct {
	*upstream
	perID atomic.Int64
	mu    sync.Mutex
	calls []bulkCall
}

// newBulkOrigin answers bulk calls with answer (nil: every id exists) and
// per-ID calls with perID (none: 418, which no test expects to see).
func newBulkOrigin(t testing.TB, answer func(w http.ResponseWriter, r *http.Request, ids []string), perID ...http.HandlerFunc) *bulkOrigin {
	t.Helper()
	if answer == nil {
		answer = usersAnswer(func(string) bool { return true })
	}
	o := &bulkOrigin{}
	o.upstream = newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/users" {
			o.perID.Add(1)
			if len(perID) > 0 {
				perID[0](w, r)
				return
			}
			http.Error(w, "per-id call", http.StatusTeapot)
			return
		}
		ids := bulkIDs(r.URL.RawQuery)
		o.mu.Lock()
		o.calls = append(o.calls, bulkCall{ids: ids, header: r.Header.Clone()})
		o.mu.Unlock()
		answer(w, r, ids)
	})
	return o
}

// reset forgets the calls recorded so far.
func (o *bulkOrigin) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = nil
}

func (o *bulkOrigin) snapshot() []bulkCall {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.calls)
}

// bulkIDs reads ids=a,b,c from a raw query, unescaping each id on its own
// so an escaped comma stays inside its id.
func bulkIDs(rawQuery string) []string {
	var ids []string
	for part := range strings.SplitSeq(rawQuery, "&") {
		v, ok := strings.CutPrefix(part, "ids=")
		if !ok {
			continue
		}
		for raw := range strings.SplitSeq(v, ",") {
			id, err := url.QueryUnescape(raw)
			if err != nil {
				id = "!bad:" + raw
			}
			ids = append(ids, id)
		}
	}
	return ids
}

// usersAnswer is a bulk endpoint as a SQL `IN (…)` behind it would answer:
// the known ids in requested order, each once, unknown ids left out. It
// indents the array, so the proxy's per-element compaction is exercised.
// Each element echoes the request headers named in echo.
func usersAnswer(known func(id string) bool, echo ...string) func(http.ResponseWriter, *http.Request, []string) {
	return func(w http.ResponseWriter, r *http.Request, ids []string) {
		seen := map[string]bool{}
		var elems []string
		for _, id := range ids {
			if seen[id] || !known(id) {
				continue
			}
			seen[id] = true
			elems = append(elems, userJSON(id, r.Header, echo...))
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "[\n  "+strings.Join(elems, ",\n  ")+"\n]\n")
	}
}

// userJSON is the one compact JSON object the origin has for id. Numeric
// ids are JSON numbers, others strings, as a real table's would be.
func userJSON(id string, h http.Header, echo ...string) string {
	var b strings.Builder
	b.WriteString(`{"id":`)
	if numeric(id) {
		b.WriteString(id)
	} else {
		b.WriteString(jsonString(id))
	}
	b.WriteString(`,"name":` + jsonString("user-"+id))
	for _, k := range echo {
		b.WriteString(`,` + jsonString(strings.ToLower(k)) + `:` + jsonString(h.Get(k)))
	}
	b.WriteString("}")
	return b.String()
}

func numeric(id string) bool {
	if id == "" || id[0] == '0' && id != "0" {
		return false
	}
	return strings.Trim(id, "0123456789") == ""
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// answer is one client's view of a response.
type answer struct {
	code   int
	header http.Header
	body   string
	err    error
}

// fetch is e.do for goroutines: it reports errors instead of failing the
// test from the wrong goroutine.
func fetch(ctx context.Context, rawURL string, hdr http.Header) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return answer{err: err}
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{code: resp.StatusCode, header: resp.Header, body: string(b), err: err}
}

// fetchAll GETs every path through the sidecar at once; hdr (may be nil)
// gives the i-th request's headers.
func fetchAll(e *env, paths []string, hdr func(i int) http.Header) []answer {
	out := make([]answer, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		var h http.Header
		if hdr != nil {
			h = hdr(i)
		}
		wg.Go(func() { out[i] = fetch(context.Background(), e.front.URL+p, h) })
	}
	wg.Wait()
	e.l1.Wait()
	return out
}

func userPaths(from, to int) []string {
	var ps []string
	for i := from; i <= to; i++ {
		ps = append(ps, "/users/"+strconv.Itoa(i))
	}
	return ps
}

func idOf(path string) string { return strings.TrimPrefix(path, "/users/") }

func histogram(t *testing.T, reg *prometheus.Registry, name, label, value string) (uint64, float64) {
	t.Helper()
	h := series(t, reg, name, label, value).GetHistogram()
	return h.GetSampleCount(), h.GetSampleSum()
}

// counter is the value of a counter family's series with label=value.
func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	return series(t, reg, name, label, value).GetCounter().GetValue()
}

// series is the one series of family name with label=value.
func series(t *testing.T, reg *prometheus.Registry, name, label, value string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q} gathered", name, label, value)
	return nil
}

// spyCache tells of every lookup, so a test knows when a request has got as
// far as the batcher.
type spyCache struct {
	proxy.Cache
	onLookup func(key string)
}

func (s spyCache) Lookup(ctx context.Context, key string) (*cache.Entry, cache.Tier, error) {
	e, tier, err := s.Cache.Lookup(ctx, key)
	s.onLookup(key)
	return e, tier, err
}

func (s spyCache) LookupLocal(ctx context.Context, key string) (*cache.Entry, cache.Tier, error) {
	e, tier, err := s.Cache.LookupLocal(ctx, key)
	s.onLookup(key)
	return e, tier, err
}

func (s spyCache) LookupMany(ctx context.Context, keys []string) ([]*cache.Entry, []cache.Tier, error) {
	es, tiers, err := s.Cache.LookupMany(ctx, keys)
	for _, k := range keys {
		s.onLookup(k)
	}
	return es, tiers, err
}

func (s spyCache) LookupShared(ctx context.Context, key string) (*cache.Entry, cache.Tier, error) {
	e, tier, err := s.Cache.LookupShared(ctx, key)
	s.onLookup(key)
	return e, tier, err
}

// failingUsersOrigin is a bulk origin that knows every id, and answers
// every bulk call 503 while failing is set.
func failingUsersOrigin(t testing.TB) (o *bulkOrigin, failing *atomic.Bool) {
	failing = new(atomic.Bool)
	answer := usersAnswer(func(string) bool { return true })
	o = newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		answer(w, r, ids)
	})
	return o, failing
}
