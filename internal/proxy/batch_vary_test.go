package proxy_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/route"
)

// compressing answers as Express's compression() does: Vary:
// Accept-Encoding on every answer, gzip when the request accepts it.
func compressing(next func(http.ResponseWriter, *http.Request, []string)) func(http.ResponseWriter, *http.Request, []string) {
	return func(w http.ResponseWriter, r *http.Request, ids []string) {
		w.Header().Add("Vary", "Accept-Encoding")
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			next(w, r, ids)
			return
		}
		rec := &bufWriter{header: w.Header()}
		next(rec, r, ids)
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(rec.body.Bytes())
		_ = zw.Close()
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.code())
		_, _ = w.Write(buf.Bytes())
	}
}

// bufWriter buffers an answer so a wrapper can re-encode it.
type bufWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *bufWriter) Header() http.Header         { return r.header }
func (r *bufWriter) WriteHeader(code int)        { r.status = code }
func (r *bufWriter) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *bufWriter) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// notStoredCount is sidecache_batch_not_stored_total{route="user",reason}.
func notStoredCount(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sidecache_batch_not_stored_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var route, why string
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "route":
					route = lp.GetValue()
				case "reason":
					why = lp.GetValue()
				}
			}
			if route == "user" && why == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestBatchVary is issue 24 item 1: a Vary on the bulk answer names
// request headers of the bulk call. Where every request of the batch sent
// the same value (the group is keyed on it) or none did (Accept-Encoding,
// which the sidecar strips and decodes itself, as behind Express's
// compression()), the elements are stored under the members' keys and
// shared; where the requests may differ, nothing is stored, and the reason
// is counted.
func TestBatchVary(t *testing.T) {
	noHeaders := func(int) http.Header { return nil }
	cases := []struct {
		name   string
		vary   string
		gzip   bool
		keyed  []string
		hdr    func(i int) http.Header // the i-th request's headers
		stored bool
		reason string
		// learns: the first opener sent the header (the Go client's
		// User-Agent), which the route withheld: the answer made
		// without it is not its variant, so it asks once more with it,
		// as the per-key path does (vary-withheld, then per-request).
		learns bool
	}{
		{"Accept-Encoding (compression())", "", true, nil, func(i int) http.Header {
			return http.Header{"Accept-Encoding": {[]string{"gzip", "", "gzip, deflate, br", "identity"}[i%4]}}
		}, true, "", false},
		{"Accept-Encoding without gzip", "Accept-Encoding", false, nil, func(i int) http.Header {
			return http.Header{"Accept-Encoding": {[]string{"gzip", "br"}[i%2]}}
		}, true, "", false},
		{"unsent Accept-Language", "Accept-Language", false, nil, noHeaders, true, "", false},
		{"keyed Accept-Language", "Accept-Language", false, []string{"Accept-Language"}, func(i int) http.Header {
			return http.Header{"Accept-Language": {[]string{"en", "fr"}[i%2]}}
		}, true, "", false},
		{"User-Agent", "User-Agent", false, nil, noHeaders, false, "vary-per-request", true},
		{"X-Forwarded-For", "X-Forwarded-For", false, nil, noHeaders, false, "vary-per-request", false},
		{"star", "*", false, nil, noHeaders, false, "vary-star", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			answer := usersAnswer(func(string) bool { return true })
			if tc.gzip {
				answer = compressing(answer)
			}
			o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
				if tc.vary != "" {
					w.Header().Set("Vary", tc.vary)
				}
				answer(w, r, ids)
			})
			rt := userRoute(100, 5*time.Millisecond)
			rt.Key = cachekey.Options{AllQuery: true, Headers: tc.keyed}
			e := newEnv(t, o.upstream, []testRoute{rt})
			const n = 4
			for i := range n {
				before := len(o.snapshot())
				a := fetch(t.Context(), e.front.URL+"/users/7", tc.hdr(i))
				if a.err != nil || a.code != 200 || a.body != userJSON("7", nil) {
					t.Fatalf("request %d: %d %q %v", i, a.code, a.body, a.err)
				}
				calls := len(o.snapshot()) - before
				private := strings.Contains(a.header.Get("Cache-Control"), "private")
				// Stored: one bulk call per distinct keyed value, then hits.
				firstOfValue := i < 1 || tc.keyed != nil && i < 2
				switch {
				case tc.stored && firstOfValue && calls != 1, tc.stored && !firstOfValue && calls != 0:
					t.Errorf("request %d: %d bulk calls (%s), want the element stored and shared", i, calls, a.header.Get("Cache-Status"))
				case !tc.stored && calls != 1+learning(tc.learns && i == 0):
					t.Errorf("request %d: %d bulk calls, want %d (nothing stored)", i, calls, 1+learning(tc.learns && i == 0))
				case tc.stored == private:
					t.Errorf("request %d: Cache-Control %q", i, a.header.Get("Cache-Control"))
				}
			}
			// A header the route withheld but the opener sent (the Go
			// client's User-Agent) is first learned (vary-withheld), then
			// forwarded with each opener's value (vary-per-request).
			got := notStoredCount(t, e.reg, tc.reason) + notStoredCount(t, e.reg, "vary-withheld")
			if want := float64(n + learning(tc.learns)); tc.reason != "" && got != want {
				t.Errorf("sidecache_batch_not_stored_total{reason=%q or vary-withheld} = %v, want %v", tc.reason, got, want)
			}
		})
	}
}

// learning is the one call more an opener that taught the route a header
// makes (TestBatchVary's learns).
func learning(learns bool) int {
	if learns {
		return 1
	}
	return 0
}

// TestBatchElementHeaders is issue 24 item 2: in origin mode the bulk
// answer's freshness and fields apply to each element, each element has a
// strong ETag over its bytes, and a client revalidating with it gets 304;
// the list ETag of the bulk answer is never an element's.
func TestBatchElementHeaders(t *testing.T) {
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		h := w.Header()
		h.Set("Cache-Control", "public, max-age=60")
		h.Set("Age", "30")
		h.Set("X-App", "users-v2")
		h.Set("Etag", `W/"list-etag"`)
		h.Set("Vary", "Accept-Encoding")
		usersAnswer(func(string) bool { return true })(w, r, ids)
	})
	rt := userRoute(100, 5*time.Millisecond)
	rt.Origin = &route.Origin{}
	e := newEnv(t, o.upstream, []testRoute{rt})
	r, b := e.get("/users/7")
	if r.StatusCode != 200 || b != userJSON("7", nil) {
		t.Fatalf("%d %q", r.StatusCode, b)
	}
	tag := r.Header.Get("Etag")
	if cc := r.Header.Get("Cache-Control"); cc != "public, max-age=60" {
		t.Errorf("Cache-Control %q, want the bulk answer's", cc)
	}
	if age, _ := strconv.Atoi(r.Header.Get("Age")); age < 30 {
		t.Errorf("Age %q, want the bulk answer's 30 carried over", r.Header.Get("Age"))
	}
	if r.Header.Get("X-App") != "users-v2" {
		t.Errorf("X-App %q, want the bulk answer's", r.Header.Get("X-App"))
	}
	if tag == "" || strings.HasPrefix(tag, "W/") || strings.Contains(tag, "list-etag") {
		t.Fatalf("ETag %q, want a strong tag of the element's own", tag)
	}
	r2, _ := e.do(http.MethodGet, "/users/7", http.Header{"If-None-Match": {tag}})
	if r2.StatusCode != http.StatusNotModified || r2.Header.Get("Etag") != tag {
		t.Errorf("revalidation: %d ETag %q, want 304 %q", r2.StatusCode, r2.Header.Get("Etag"), tag)
	}
	r3, _ := e.get("/users/8")
	if r3.Header.Get("Etag") == tag {
		t.Errorf("two elements share ETag %q", tag)
	}
	if n := len(o.snapshot()); n != 2 {
		t.Errorf("%d bulk calls, want 2 (the 304 from the stored element)", n)
	}
}

// TestSplitListGzipAndETag is the split half of issue 24 item 2: a list is
// gzip-coded for a client that accepts it (Vary: Accept-Encoding), carries
// a strong ETag per coding, and If-None-Match gets 304.
func TestSplitListGzipAndETag(t *testing.T) {
	o := newBulkOrigin(t, nil)
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	e := newEnv(t, o.upstream, []testRoute{userRoute(100, 5*time.Millisecond), list})
	var ids, elems []string
	for i := 1; i <= 60; i++ {
		ids = append(ids, strconv.Itoa(i))
		elems = append(elems, userJSON(strconv.Itoa(i), nil))
	}
	want := "[" + strings.Join(elems, ",") + "]"
	path := "/users?ids=" + strings.Join(ids, ",")

	plain, pb := e.get(path)
	if plain.StatusCode != 200 || pb != want || plain.Header.Get("Content-Encoding") != "" {
		t.Fatalf("identity: %d %q %q", plain.StatusCode, plain.Header.Get("Content-Encoding"), pb)
	}
	req, _ := http.NewRequest(http.MethodGet, e.front.URL+path, nil)
	req.Header.Set("Accept-Encoding", "gzip, deflate, br")
	resp, err := client.Do(req) // sets Accept-Encoding itself: no transparent decoding
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" || !strings.Contains(resp.Header.Get("Vary"), "Accept-Encoding") {
		t.Fatalf("gzip client: Content-Encoding %q Vary %q", resp.Header.Get("Content-Encoding"), resp.Header.Get("Vary"))
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(zr)
	if string(got) != want {
		t.Errorf("gzip body decodes to %q", got)
	}
	ptag, gtag := plain.Header.Get("Etag"), resp.Header.Get("Etag")
	if ptag == "" || gtag == "" || ptag == gtag || strings.HasPrefix(ptag, "W/") {
		t.Errorf("ETags identity %q gzip %q, want two strong tags", ptag, gtag)
	}
	r304, _ := e.do(http.MethodGet, path, http.Header{"If-None-Match": {ptag}})
	if r304.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: %d, want 304", r304.StatusCode)
	}
}

// TestBatchElementETagField: with batch.etag_field the app's own validator
// for each element is its ETag, and revalidates; an element whose field is
// not entity-tag text gets the sidecar's own.
func TestBatchElementETagField(t *testing.T) {
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		var elems []string
		for _, id := range ids {
			rev := `"W/\"rev-` + id + `\""`
			if id == "2" {
				rev = `"has space"`
			}
			elems = append(elems, `{"id":"`+id+`","rev":`+rev+`}`)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "["+strings.Join(elems, ",")+"]")
	})
	rt := userRoute(100, 5*time.Millisecond)
	rt.Batch.ETagField = "rev"
	e := newEnv(t, o.upstream, []testRoute{rt})
	r, _ := e.get("/users/1")
	if tag := r.Header.Get("Etag"); tag != `W/"rev-1"` {
		t.Fatalf("ETag %q, want the app's W/\"rev-1\"", tag)
	}
	if r2, _ := e.do(http.MethodGet, "/users/1", http.Header{"If-None-Match": {`W/"rev-1"`}}); r2.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match with the app's tag: %d, want 304", r2.StatusCode)
	}
	r3, b3 := e.get("/users/2")
	if tag := r3.Header.Get("Etag"); tag == "" || strings.Contains(tag, "space") || tag == `W/"rev-2"` {
		t.Errorf("element with an unusable rev: ETag %q (body %q), want the sidecar's own", tag, b3)
	}
}

// TestBatchElementAge: the age a bulk answer arrived with is each
// element's, on a route with and without origin freshness, worked out once
// for the whole answer (elementHeads): the miss and the hit that follows
// report it, once, and the route's TTL counts from it.
func TestBatchElementAge(t *testing.T) {
	for _, origin := range []bool{false, true} {
		t.Run("origin="+strconv.FormatBool(origin), func(t *testing.T) {
			o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
				w.Header().Set("Cache-Control", "public, max-age=60")
				w.Header().Set("Age", "30")
				usersAnswer(func(string) bool { return true })(w, r, ids)
			})
			rt := userRoute(100, 5*time.Millisecond)
			if origin {
				rt.Origin = &route.Origin{}
			}
			e := newEnv(t, o.upstream, []testRoute{rt})
			for i, want := range []string{"fwd=miss", "hit"} {
				r, b := e.get("/users/7")
				if r.StatusCode != 200 || b != userJSON("7", nil) {
					t.Fatalf("request %d: %d %q", i, r.StatusCode, b)
				}
				if cs := r.Header.Get("Cache-Status"); !strings.Contains(cs, want) {
					t.Errorf("request %d: Cache-Status %q, want %s", i, cs, want)
				}
				ages := r.Header.Values("Age")
				if age, _ := strconv.Atoi(r.Header.Get("Age")); len(ages) != 1 || age < 30 || age >= 60 {
					t.Errorf("request %d: Age %q, want one value from 30, the bulk answer's", i, ages)
				}
			}
			if n := len(o.snapshot()); n != 1 {
				t.Errorf("%d bulk calls, want 1", n)
			}
		})
	}
}
