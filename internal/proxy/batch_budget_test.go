package proxy_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/batch"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/proxy"
	"github.com/sidecache/sidecache/internal/route"
)

// intOrigin is a bulk endpoint in front of a database whose id column is a
// 32-bit int: an id that does not fit fails the whole query, answered with
// status (400 as a validating framework does, 500 as one that lets the
// database error through). Other ids exist.
func intOrigin(t *testing.T, status int) *bulkOrigin {
	return newBulkOrigin(t, intAnswer(status))
}

// intAnswer is intOrigin's bulk answer.
func intAnswer(status int) func(http.ResponseWriter, *http.Request, []string) {
	good := usersAnswer(func(string) bool { return true })
	return func(w http.ResponseWriter, r *http.Request, ids []string) {
		for _, id := range ids {
			if _, err := strconv.ParseInt(id, 10, 32); err != nil {
				http.Error(w, `invalid input syntax for type integer: "`+id+`"`, status)
				return
			}
		}
		good(w, r, ids)
	}
}

// TestBatchListOfBadIDsWithinBudget is issue 20 item 4's first half: one
// GET /users?ids= of 1,000 ids that match the route but overflow the
// upstream's int cost 1,991 bulk calls; it must cost at most its budget
// (batch.ListBudget: 2 + 2·⌈log₂ n⌉, and one more per first call past one),
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
				if b := batch.ListBudget(n, 100); calls > b {
					t.Errorf("try %d: one request of %d ids cost %d bulk calls, want at most ⌈n/100⌉ − 1 + 2 + 2·⌈log₂ 100⌉ = %d", try, n, calls, b)
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

// TestBatchListFailureSparesCollapsedVictim is the harness's collateral
// 502 (a good GET /u/4 answered "upstream-error"): a list of seven ids the
// upstream rejects and a good one, 4, runs out of its call budget while
// halving, and 4 fails with it (ErrBudget). A victim's GET /users/4 that
// arrives while the list's bulk call is in flight must not inherit that
// failure: it was sharing the list's flight for the key, and got the
// list's error. Now a list's ids never lead (nor join) a flight: the
// victim fetches for itself and gets its element; the list stays within
// its budget.
func TestBatchListFailureSparesCollapsedVictim(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	// Deferred, not a Cleanup: it must run before the cleanups that
	// close the servers, which wait for the held call.
	defer unblock()
	rejectBad := intAnswer(http.StatusBadRequest)
	var first atomic.Bool
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		if first.CompareAndSwap(false, true) {
			held(t, release) // the list's first call, held until the victim is in
		}
		rejectBad(w, r, ids)
	})
	var victimLookups atomic.Int64
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user", MaxIDs: 8}}
	e := newEnv(t, o.upstream, []testRoute{userRoute(8, time.Millisecond), list}, func(po *proxy.Options, _ *l1.Store) {
		po.Cache = spyCache{Cache: po.Cache, onLookup: func(k string) {
			if strings.HasSuffix(k, "/users/4") {
				victimLookups.Add(1)
			}
		}}
	})
	ids := []string{"99999991001", "99999991002", "99999991003", "99999991004", "99999991005", "99999991006", "99999991007", "4"}
	l := make(chan answer, 1)
	go func() { l <- fetch(context.Background(), e.front.URL+"/users?ids="+strings.Join(ids, ","), nil) }()
	waitFor(t, func() bool { return len(o.snapshot()) == 1 }) // the list's 8 ids, held
	n := victimLookups.Load()
	v := make(chan answer, 1)
	go func() { v <- fetch(context.Background(), e.front.URL+"/users/4", nil) }()
	// The victim's L1 lookup, then the both-tier lookup of the fill it
	// runs for itself. On a flight of the list's it would wait instead,
	// with no lookup of its own.
	for deadline := time.Now().Add(10 * time.Second); victimLookups.Load() < n+2; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Error("the victim's GET /users/4 ran no fill of its own: it waits on the list's flight")
			break
		}
	}
	unblock()
	if got := <-v; got.err != nil || got.code != 200 || got.body != userJSON("4", nil) {
		t.Errorf("victim GET /users/4: %d %q %v (%s), want its element", got.code, got.body, got.err, got.header.Get("Cache-Status"))
	}
	// The list fails: 502 when its budget ran out before a bad id was
	// asked alone, else that id's own 400 (a refused id refuses the list).
	if got := <-l; got.err != nil || got.code != http.StatusBadGateway && got.code != http.StatusBadRequest {
		t.Errorf("the list of seven bad ids: %d %q %v, want 502 or a bad id's 400", got.code, got.body, got.err)
	}
	var listCalls, own int
	var calls [][]string
	for _, c := range o.snapshot() {
		calls = append(calls, c.ids)
		if slices.Equal(c.ids, []string{"4"}) && own == 0 {
			own++ // the victim's own call (the list's halving never gets to 4 alone)
			continue
		}
		listCalls++
	}
	if own != 1 || listCalls > batch.Budget(len(ids)) {
		t.Errorf("%d calls of the victim's own, %d of the list's (budget %d): %v", own, listCalls, batch.Budget(len(ids)), calls)
	}
}
