package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// badAnswers are the ways an upstream's bulk endpoint refuses a list that
// holds a bad id, and what the proxy must answer for that id once it is
// isolated: the upstream's own answer to the one-id call (status and body)
// for a 4xx, a 502 for a 200 that is not an array of elements.
var badAnswers = []struct {
	name     string
	write    func(w http.ResponseWriter, bad string)
	code     int    // the bad id's answer
	bodyOf   string // its body, with %s for the id ("" for the proxy's own 502)
	negative time.Duration
}{
	{"400 naming the id", func(w http.ResponseWriter, bad string) { http.Error(w, "bad id "+bad, 400) }, 400, "bad id %s\n", 0},
	{"404 under negative_ttl", func(w http.ResponseWriter, bad string) { http.Error(w, "no such id "+bad, 404) }, 404, "no such id %s\n", time.Minute},
	{"422 JSON error", func(w http.ResponseWriter, bad string) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(422)
		_, _ = io.WriteString(w, `{"error":"bad id `+bad+`"}`)
	}, 422, `{"error":"bad id %s"}`, 0},
	{"200 of the wrong shape", func(w http.ResponseWriter, bad string) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"error":"bad id `+bad+`"}`)
	}, 502, "", 0},
}

// badIDOrigin answers a bulk call holding a non-numeric id as bad answers
// it (naming the first such id), and any other call with the elements.
func badIDOrigin(t *testing.T, bad func(w http.ResponseWriter, id string)) *bulkOrigin {
	good := usersAnswer(func(string) bool { return true })
	return newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		for _, id := range ids {
			if !numeric(id) {
				bad(w, id)
				return
			}
		}
		good(w, r, ids)
	})
}

// TestBatchIsolatesBadIDs: clients reading good ids and clients reading
// bad ones (the 4 readers of /users/{n} and 2 of /users/x{n}) share
// batches; the bulk calls that fail on the bad ids are halved until each
// bad id is alone. Every good id gets 200 and its own element, every bad id
// the upstream's own answer for it (never another id's), and a second read
// shows the good ids stored and nothing stored for the bad ones.
func TestBatchIsolatesBadIDs(t *testing.T) {
	for _, tc := range badAnswers {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := badIDOrigin(t, tc.write)
			rt := userRoute(20, 20*time.Millisecond)
			rt.NegativeTTL = tc.negative
			e := newEnv(t, o.upstream, []testRoute{rt})
			var paths, bad []string
			for i := 1; i <= 40; i++ {
				paths = append(paths, "/users/"+strconv.Itoa(i))
				if i%2 == 0 {
					id := "x" + strconv.Itoa(i)
					paths, bad = append(paths, "/users/"+id), append(bad, id)
				}
			}
			check := func(round string, got []answer) {
				t.Helper()
				for i, a := range got {
					id := idOf(paths[i])
					want, code := userJSON(id, nil), 200
					if !numeric(id) {
						want, code = "", tc.code
						if tc.bodyOf != "" {
							want = fmt.Sprintf(tc.bodyOf, id)
						}
					}
					switch {
					case a.err != nil:
						t.Fatalf("%s %s: %v", round, id, a.err)
					case a.code != code:
						t.Errorf("%s %s: status %d %q, want %d", round, id, a.code, a.body, code)
					case want != "" && a.body != want:
						t.Errorf("%s %s: body %q, want %q", round, id, a.body, want)
					}
				}
			}
			check("first read", fetchAll(e, paths, nil))
			if p := o.perID.Load(); p != 0 {
				t.Errorf("per-id calls = %d, want 0 (the bulk endpoint answers each id)", p)
			}
			for _, id := range bad {
				if !slices.ContainsFunc(o.snapshot(), func(c bulkCall) bool { return slices.Equal(c.ids, []string{id}) }) {
					t.Errorf("bad id %s was never fetched alone", id)
				}
			}
			if n := e.l1.Items(); n != 40 {
				t.Errorf("l1 holds %d entries, want the 40 good ids only", n)
			}
			if n := counter(t, e.reg, "sidecache_batch_isolations_total", "route", "user"); n < 1 {
				t.Errorf("sidecache_batch_isolations_total = %v, want at least 1", n)
			}

			before := len(o.snapshot())
			check("second read", fetchAll(e, paths, nil))
			again := o.snapshot()[before:]
			var fetched []string
			for _, c := range again {
				fetched = append(fetched, c.ids...)
			}
			slices.Sort(fetched)
			fetched = slices.Compact(fetched)
			slices.Sort(bad)
			if !slices.Equal(fetched, bad) {
				t.Errorf("second read fetched %v, want exactly the bad ids %v (good ids cached, bad ones not)", fetched, bad)
			}
		})
	}
}

// TestBatchIsolatesUniformFailure: when every bulk call fails the same way
// on its ids, each id ends with a call of its own and its own answer, and
// the cost is bounded: one retry per client request, n+1 calls for a batch
// of n one-id requests (issue 20 item 4: at most 2 calls per request).
func TestBatchIsolatesUniformFailure(t *testing.T) {
	for _, tc := range badAnswers {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
				tc.write(w, strings.Join(ids, ","))
			})
			rt := userRoute(8, time.Second)
			rt.NegativeTTL = tc.negative
			e := newEnv(t, o.upstream, []testRoute{rt})
			paths := userPaths(1, 8)
			for i, a := range fetchAll(e, paths, nil) {
				id := idOf(paths[i])
				if a.err != nil || a.code != tc.code {
					t.Fatalf("%s: %d %q %v, want %d", id, a.code, a.body, a.err, tc.code)
				}
				if tc.bodyOf != "" && a.body != fmt.Sprintf(tc.bodyOf, id) {
					t.Errorf("%s: body %q, want the answer to its own one-id call", id, a.body)
				}
				if tc.bodyOf == "" && strings.Contains(a.body, "bad id") {
					t.Errorf("%s: the 502 carries the upstream's body %q", id, a.body)
				}
			}
			calls := o.snapshot()
			if len(calls) != len(paths)+1 {
				t.Errorf("%d bulk calls for a batch of %d failing alike, want %d (one retry per request)", len(calls), len(paths), len(paths)+1)
			}
			if n := e.l1.Items(); n != 0 {
				t.Errorf("l1 holds %d entries after failed calls", n)
			}
		})
	}
}
