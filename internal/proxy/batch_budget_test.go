package proxy_test

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/route"
)

// budget is issue 20 item 4's bound on the upstream calls one client
// request of n ids may cause, whatever the upstream answers.
func budget(n int) int { return int(2 + 2*math.Log2(float64(n))) }

// intOrigin is a bulk endpoint in front of a database whose id column is a
// 32-bit int: an id that does not fit fails the whole query, answered with
// status (400 as a validating framework does, 500 as one that lets the
// database error through). Other ids exist.
func intOrigin(t *testing.T, status int) *bulkOrigin {
	good := usersAnswer(func(string) bool { return true })
	return newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		for _, id := range ids {
			if _, err := strconv.ParseInt(id, 10, 32); err != nil {
				http.Error(w, `invalid input syntax for type integer: "`+id+`"`, status)
				return
			}
		}
		good(w, r, ids)
	})
}

// TestBatchListOfBadIDsWithinBudget is issue 20 item 4's first half: one
// GET /users?ids= of 1,000 ids that match the route but overflow the
// upstream's int cost 1,991 bulk calls; it must cost at most 2 + 2·log₂ n,
// the first time and again (nothing remembered must make it cost more).
func TestBatchListOfBadIDsWithinBudget(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusInternalServerError} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			o := intOrigin(t, status)
			const n = 1000
			list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user", MaxIDs: n}}
			e := newEnv(t, o.upstream, []testRoute{userRoute(100, 5*time.Millisecond), list})
			ids := make([]string, n)
			for i := range ids {
				ids[i] = "9999999" + strconv.Itoa(1000+i) // 11 digits: over any int32
			}
			for try := 1; try <= 2; try++ {
				before := len(o.snapshot())
				r, b := e.get("/users?ids=" + strings.Join(ids, ","))
				calls := len(o.snapshot()) - before
				t.Logf("try %d: %d bulk calls, status %d", try, calls, r.StatusCode)
				if calls > budget(n) {
					t.Errorf("try %d: one request of %d ids cost %d bulk calls, want at most 2 + 2·log₂ n = %d", try, n, calls, budget(n))
				}
				if r.StatusCode == http.StatusOK && b != "[]" {
					t.Errorf("try %d: 200 %q for ids that all fail", try, b)
				}
			}
		})
	}
}

// TestBatchBadIDSparesOtherClients is issue 20 item 4's second half: an
// attacker loops on /users/99999999999999999999, which the upstream
// answers 500 for, while victims read good ids through the same batches.
// Every victim gets its element and waits at most one extra bulk call; the
// bad id, once found, is quarantined and fetched alone (negative_ttl is 0
// here: the quarantine still holds, for its default), so later batches of
// victims succeed at their first call.
func TestBatchBadIDSparesOtherClients(t *testing.T) {
	o := intOrigin(t, http.StatusInternalServerError)
	e := newEnv(t, o.upstream, []testRoute{userRoute(8, 50*time.Millisecond)})
	const bad = "99999999999999999999"
	for round := range 5 {
		paths := []string{"/users/" + bad}
		for i := range 7 {
			paths = append(paths, "/users/"+strconv.Itoa(100*round+i))
		}
		before := len(o.snapshot())
		got := fetchAll(e, paths, nil)
		for i, a := range got[1:] {
			if a.err != nil || a.code != 200 || a.body != userJSON(idOf(paths[i+1]), nil) {
				t.Errorf("round %d: victim %s got %d %q %v, want its element", round, paths[i+1], a.code, a.body, a.err)
			}
		}
		if got[0].code != http.StatusBadGateway {
			t.Errorf("round %d: the bad id got %d, want 502", round, got[0].code)
		}
		calls := o.snapshot()[before:]
		for _, p := range paths[1:] {
			n := 0
			for _, c := range calls {
				if slices.Contains(c.ids, idOf(p)) {
					n++
				}
			}
			if n > 2 || round > 0 && n != 1 {
				t.Errorf("round %d: victim %s was in %d bulk calls, want at most 2 (1 once the bad id is known)", round, p, n)
			}
		}
		for _, c := range calls {
			if round > 0 && slices.Contains(c.ids, bad) && len(c.ids) != 1 {
				t.Errorf("round %d: the quarantined id rode in %v", round, c.ids)
			}
		}
	}
	if q := gauge(t, e, "sidecache_batch_quarantined"); q != 1 {
		t.Errorf("sidecache_batch_quarantined = %v, want 1", q)
	}
}

func gauge(t *testing.T, e *env, name string) float64 {
	t.Helper()
	return series(t, e.reg, name, "route", "user").GetGauge().GetValue()
}
