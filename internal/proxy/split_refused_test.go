package proxy_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/batch"
	"github.com/sidecache/sidecache/internal/route"
)

// TestSplitListRefusedAsUpstreamWould: a split list of one good id and
// many that the bulk endpoint refuses (400 for an id its int column
// cannot hold) is answered as the upstream answers that list called
// directly: its 400, never stored. The isolation that would find the bad
// ids one by one runs out of the list's call budget long before (13 calls
// for 40 ids at max_size 32, 25 for 1,000 at 100), and every id it had
// not got down to alone failed with 502, a failure of the upstream the
// upstream never had: each call refused was a call of this list's own ids
// with its own headers, and the app refuses any list holding an id it
// refuses (docs/configuration.md, routes[].split). A list of one good id
// and ids the bulk answer leaves out (unknown) is the good id's element,
// as the upstream's IN (…) answers it.
func TestSplitListRefusedAsUpstreamWould(t *testing.T) {
	cases := []struct {
		name    string
		n, size int
		known   bool // the other ids are unknown (left out), not refused
	}{
		{"1 good and 39 refused at max_size 32", 40, 32, false},
		{"1 good and 999 refused at max_size 100", 1000, 100, false},
		{"1 good and 999 unknown at max_size 100", 1000, 100, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			answer := intAnswer(http.StatusBadRequest)
			if tc.known {
				answer = usersAnswer(func(id string) bool { return id == "7" })
			}
			o := newBulkOrigin(t, answer)
			list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user", MaxIDs: tc.n}}
			e := newEnv(t, o.upstream, []testRoute{userRoute(tc.size, 5*time.Millisecond), list})
			ids := make([]string, tc.n)
			for i := range ids {
				ids[i] = "9999999" + strconv.Itoa(1000+i) // 11 digits: over any int32
			}
			ids[tc.n/3] = "7"
			path := "/users?ids=" + strings.Join(ids, ",")
			direct, err := client.Get(o.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := io.ReadAll(direct.Body)
			direct.Body.Close()
			o.reset()
			r, b := e.get(path)
			calls := len(o.snapshot())
			t.Logf("%d bulk calls, %d %.60q (%s); directly %d %.60q", calls, r.StatusCode, b, r.Header.Get("Cache-Status"), direct.StatusCode, want)
			if budget := batch.ListBudget(tc.n, tc.size); calls > budget {
				t.Errorf("%d bulk calls, want at most the list's budget %d", calls, budget)
			}
			switch {
			case tc.known:
				if r.StatusCode != http.StatusOK || b != userJSON("7", nil) && b != "["+userJSON("7", nil)+"]" {
					t.Errorf("got %d %.80q, want 200 with the good id's element alone", r.StatusCode, b)
				}
			case r.StatusCode != direct.StatusCode || !strings.HasPrefix(b, `invalid input syntax for type integer: "9999999`):
				t.Errorf("got %d %.80q (%s), want the upstream's own answer to the list, %d %.80q", r.StatusCode, b, r.Header.Get("Cache-Status"), direct.StatusCode, want)
			}
			// Never stored: the list's refusal is asked for again.
			o.reset()
			r2, _ := e.get(path)
			if calls := len(o.snapshot()); calls == 0 || r2.StatusCode != r.StatusCode {
				t.Errorf("again: %d bulk calls, %d; want the upstream asked again, %d", calls, r2.StatusCode, r.StatusCode)
			}
		})
	}
}
