package proxy_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/route"
)

// echoNorm is how an app reads an id and echoes it: a slug by its leading
// digits (Rails' find reads "5-acme" as 5, and to_param links it so), any
// other id case-folded (PostgreSQL reads a uuid in either case and prints
// it in lower case).
func echoNorm(id string) string {
	if m := regexp.MustCompile(`^([0-9]+)-`).FindStringSubmatch(id); m != nil {
		return m[1]
	}
	return strings.ToLower(id)
}

// TestBulkEchoedSpelling: an upstream that echoes an id in a spelling of
// its own — 5 for the slug 5-acme, ab12… for the uuid AB12… — answers
// each id, but its element names the id otherwise than the call asked for
// it. The id asked for then had no element and was answered 404 (stored
// under negative_ttl, and left out of a split list) for a record the
// upstream has: GET /users/5-acme called directly is user 5. Such an id
// is not known to be absent: its request passes through to the upstream,
// its own answer, nothing stored, and its next ones pass straight through
// for a while (hit-for-pass), as a record too large to keep does; a list
// holding it is the upstream's own list. An answer whose elements all
// name ids asked for keeps its 404s for the others.
func TestBulkEchoedSpelling(t *testing.T) {
	const uuid = "AB12CD34-0000-4000-8000-00000000000F"
	perID := func(w http.ResponseWriter, r *http.Request) {
		id := echoNorm(strings.TrimPrefix(r.URL.Path, "/users/"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(userJSON(id, nil)))
	}
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		norm := make([]string, len(ids))
		for i, id := range ids {
			norm[i] = echoNorm(id)
		}
		usersAnswer(func(id string) bool { return id != "404" })(w, r, norm)
	}, perID)
	neg := userRoute(8, 2*time.Millisecond)
	neg.NegativeTTL = time.Minute
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	e := newEnv(t, o.upstream, []testRoute{neg, list})
	for _, c := range []struct{ path, want string }{
		{"/users/5-acme", userJSON("5", nil)},
		{"/users/" + uuid, userJSON(strings.ToLower(uuid), nil)},
	} {
		for try := 1; try <= 2; try++ {
			o.reset()
			before := o.perID.Load()
			r, b := e.get(c.path)
			if r.StatusCode != http.StatusOK || b != c.want {
				t.Errorf("GET %s (%d): %d %q (%s), want 200 %q: the upstream's own answer for it", c.path, try, r.StatusCode, b, r.Header.Get("Cache-Status"), c.want)
			}
			calls := len(o.snapshot()) + int(o.perID.Load()-before)
			if want := []int{2, 1}[try-1]; calls != want {
				t.Errorf("GET %s (%d): %d upstream calls, want %d (a bulk call, then passed through; then straight through)", c.path, try, calls, want)
			}
		}
	}
	// A list holding such an id is the upstream's own list.
	r, b := e.get("/users?ids=7,3-acme")
	if want := "[\n  " + userJSON("7", nil) + ",\n  " + userJSON("3", nil) + "\n]\n"; r.StatusCode != http.StatusOK || b != want {
		t.Errorf("GET /users?ids=7,3-acme: %d %q (%s), want the upstream's list %q", r.StatusCode, b, r.Header.Get("Cache-Status"), want)
	}
	// An id the answer leaves out while every element it holds names an
	// id asked for is absent, as before: 404, stored.
	o.reset()
	for range 2 {
		if r, _ := e.get("/users/404"); r.StatusCode != http.StatusNotFound {
			t.Errorf("GET /users/404: %d, want 404", r.StatusCode)
		}
	}
	if n := len(o.snapshot()); n != 1 {
		t.Errorf("GET /users/404 twice: %d bulk calls, want 1 (its 404 stored)", n)
	}
}
