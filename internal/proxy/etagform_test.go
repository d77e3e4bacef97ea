package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/proxy"
	"github.com/sidecache/sidecache/internal/route"
)

// seen is what a client receives, byte for byte but for the fields that
// tell the time (Date, Age: a second boundary may fall between two
// requests): its status, every other header field and the body.
func seen(r *http.Response, body string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", r.StatusCode)
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		if k != "Date" && k != "Age" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %q\n", k, r.Header[k])
	}
	fmt.Fprintf(&b, "Age present: %v\n\n%s", r.Header.Get("Age") != "", body)
	return b.String()
}

// TestElementETagFormsAnswerAlike: the elements of a bulk answer share one
// header map and keep their ETags beside it (cache.Entry.SetETag); an L2
// hit decodes the same entry with the ETag in its header. Both forms must
// answer every request alike: a hit, HEAD, each kind of If-None-Match (the
// element's tag, weak, another element's, a list, *), If-Modified-Since,
// and a split list made of them; and both must cost L1 the same.
func TestElementETagFormsAnswerAlike(t *testing.T) {
	for _, field := range []string{"", "rev"} {
		t.Run("etag_field="+field, func(t *testing.T) {
			const lastMod = "Mon, 02 Jan 2006 15:04:05 GMT"
			o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
				var elems []string
				for _, id := range ids {
					if id != "3" { // 3 is unknown: its element is a 404
						elems = append(elems, `{"id":`+id+`,"rev":"r`+id+`","name":"user-`+id+`"}`)
					}
				}
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				w.Header().Set("Cache-Control", "public, max-age=60")
				w.Header().Set("Last-Modified", lastMod)
				w.Header().Set("X-App", "a")
				w.Header().Set("Etag", `"whole-array"`)
				_, _ = io.WriteString(w, "["+strings.Join(elems, ",")+"]")
			})
			rt := userRoute(100, 20*time.Millisecond)
			rt.Batch.ETagField = field
			rt.NegativeTTL = time.Minute // the 404 element is stored too, in the answer's other shared header
			list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
			e := newEnv(t, o.upstream, []testRoute{rt, list})
			for _, a := range fetchAll(e, []string{"/users/1", "/users/2", "/users/3"}, nil) {
				if a.err != nil {
					t.Fatal(a.err)
				}
			}
			e.l1.Wait()
			// Counted after the fill, not assumed to be 1: the three
			// requests share a bulk call only when they meet within its
			// window, which a loaded machine can stretch past.
			calls := len(o.snapshot())
			ctx := context.Background()
			keys, _ := e.l1.KeysWithTag(proxy.RouteTag("user"), 100)
			tags := map[string]string{}
			fieldForm := 0
			for _, k := range keys {
				if en, ok, _ := e.l1.Get(ctx, k); ok && en.ETagField() != nil {
					fieldForm++
					if en.Header.Get("Etag") != "" {
						t.Fatalf("%s: an ETag beside the header and one in it", k)
					}
					tags[string(en.Body)] = en.ETag()
				}
			}
			if fieldForm != 2 {
				t.Fatalf("%d of %d stored elements keep their ETag beside the header, want 2 (the test must see that form)", fieldForm, len(keys))
			}
			tag1, tag2 := tags[`{"id":1,"rev":"r1","name":"user-1"}`], tags[`{"id":2,"rev":"r2","name":"user-2"}`]
			if field != "" && (tag1 != `"r1"` || tag2 != `"r2"`) {
				t.Fatalf("tags %q %q, want the app's", tag1, tag2)
			}
			type req struct {
				method, path string
				h            http.Header
			}
			reqs := []req{
				{"GET", "/users/1", nil},
				{"GET", "/users/3", nil},
				{"HEAD", "/users/1", nil},
				{"GET", "/users/1", http.Header{"If-None-Match": {tag1}}},
				{"HEAD", "/users/1", http.Header{"If-None-Match": {tag1}}},
				{"GET", "/users/1", http.Header{"If-None-Match": {"W/" + tag1}}},
				{"GET", "/users/1", http.Header{"If-None-Match": {tag2}}},
				{"GET", "/users/1", http.Header{"If-None-Match": {`"x", ` + tag1}}},
				{"GET", "/users/1", http.Header{"If-None-Match": {"*"}}},
				{"GET", "/users/3", http.Header{"If-None-Match": {"*"}}},
				{"GET", "/users/1", http.Header{"If-Modified-Since": {lastMod}}},
				{"GET", "/users?ids=1,2,3", nil},
			}
			answers := func() []string {
				var out []string
				for _, q := range reqs {
					r, b := e.do(q.method, q.path, q.h)
					out = append(out, fmt.Sprintf("%s %s %v\n%s", q.method, q.path, q.h, seen(r, b)))
				}
				return out
			}
			before := answers()
			if !strings.Contains(before[3], "304\n") || !strings.Contains(before[6], "200\n") {
				t.Fatalf("the element's tag must make a 304 and another element's must not:\n%s\n%s", before[3], before[6])
			}
			// The same entries as an L2 hit decodes them: the ETag in
			// the header.
			for _, k := range keys {
				en, ok, _ := e.l1.Get(ctx, k)
				if !ok || en.ETagField() == nil {
					continue
				}
				twin, err := cache.Unmarshal(cache.Marshal(en))
				if err != nil {
					t.Fatal(err)
				}
				if twin.ETagField() != nil || twin.Header.Get("Etag") != en.ETag() || twin.ETag() != en.ETag() {
					t.Fatalf("decoded: ETag %q in the header, want %q", twin.Header.Get("Etag"), en.ETag())
				}
				if twin.KeyedSize(k) != en.KeyedSize(k) {
					t.Errorf("L1 charge: %d with the ETag in the header, %d beside it", twin.KeyedSize(k), en.KeyedSize(k))
				}
				if err := e.l1.Set(ctx, k, twin); err != nil {
					t.Fatal(err)
				}
			}
			e.l1.Wait()
			after := answers()
			for i := range reqs {
				if before[i] != after[i] {
					t.Errorf("ETag beside the header:\n%s\nETag in the header:\n%s", before[i], after[i])
				}
			}
			if n := len(o.snapshot()); n != calls {
				t.Errorf("%d bulk calls after the fill's %d, want none (every request above is a hit)", n-calls, calls)
			}
		})
	}
}

// TestStaleFieldETagRevalidates: a stale entry whose ETag is kept beside
// its header revalidates as one with the ETag in it: the conditional it
// sends, and what a 304 that confirms it, or one naming another tag,
// makes of it.
func TestStaleFieldETagRevalidates(t *testing.T) {
	const tag = `"v1"`
	var mu sync.Mutex
	var inm []string
	var notModifiedTag string
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inm = append(inm, r.Header.Get("If-None-Match"))
		t304 := notModifiedTag
		mu.Unlock()
		w.Header().Set("Cache-Control", "max-age=60")
		if r.Header.Get("If-None-Match") == tag && t304 != "" {
			w.Header().Set("Etag", t304)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Etag", `"v2"`)
		_, _ = io.WriteString(w, "fresh body")
	})
	rt := testRoute{Name: "plain", Pattern: "/p/{id}", TTL: time.Minute}
	for _, c := range []struct{ name, t304 string }{{"confirmed", tag}, {"confirmed-without-etag", ""}, {"other-tag", `"v9"`}} {
		var got []string
		for _, form := range []string{"header", "field"} {
			e := newEnv(t, up, []testRoute{rt})
			e.get("/p/1")
			ctx := context.Background()
			keys, _ := e.l1.KeysWithTag(proxy.RouteTag("plain"), 10)
			if len(keys) != 1 {
				t.Fatalf("%d keys", len(keys))
			}
			old, _, _ := e.l1.Get(ctx, keys[0])
			st := &cache.Entry{Status: 200, Body: []byte("stored body"), StoredAt: time.Now().Add(-2 * time.Minute),
				TTL: time.Minute, Keep: 10 * time.Minute, Tags: old.Tags,
				Header: http.Header{"Content-Type": {"text/plain"}, "Cache-Control": {"max-age=60"}}}
			if form == "field" {
				st.SetETag([]string{tag})
			} else {
				st.Header["Etag"] = []string{tag}
			}
			if err := e.l1.Set(ctx, keys[0], st); err != nil {
				t.Fatal(err)
			}
			e.l1.Wait()
			mu.Lock()
			inm, notModifiedTag = nil, c.t304
			mu.Unlock()
			r, b := e.get("/p/1")
			mu.Lock()
			sent := slices.Clone(inm)
			mu.Unlock()
			got = append(got, fmt.Sprintf("sent If-None-Match %q\n%s", sent, seen(r, b)))
		}
		if got[0] != got[1] {
			t.Errorf("%s: ETag in the header:\n%s\nETag beside it:\n%s", c.name, got[0], got[1])
		}
		if !strings.Contains(got[1], `sent If-None-Match ["\"v1\""`) {
			t.Errorf("%s: the stale entry's tag was not sent:\n%s", c.name, got[1])
		}
	}
}
