package proxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/route"
)

// Ids spelled the ways a lenient origin reads as one integer (internal/
// spelling.AppendInts): lenient for invalidation, strict for storage, on the
// cached, batch and split paths alike, and a write's route tags dropped on
// every answer after which it may have been applied.

// leadingInt is Ruby's String#to_i over a trimmed segment: optional
// blanks (PostgreSQL's int4 input skips them) and sign, then the leading
// digits, as Rails' find("5-acme"), parseInt and MySQL's string-to-int
// cast read it; at least one digit.
func leadingInt(s string) (int, error) {
	s = strings.TrimSpace(s)
	end := 0
	if end < len(s) && (s[end] == '+' || s[end] == '-') {
		end++
	}
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	return strconv.Atoi(s[:end])
}

// lenientOrigin is an app whose ids read as leadingInt does, and whose
// slugs that read as no number ("acme") name resources of their own. It
// serves /{kind}/{id}, /{kind}/{id}/summary and the bulk /{kind}?ids=,
// each element's "id" the id as asked. A PATCH applies its body as the
// resource's name, then answers ?code= (default 204).
type lenientOrigin struct {
	*upstream
	mu    sync.Mutex
	names map[string]string
	read  func(id string) (int, error) // leadingInt unless told
}

func newLenientOrigin(t *testing.T) *lenientOrigin { return newOriginReading(t, leadingInt) }

// newOriginReading is a lenientOrigin whose ids read as read reads them.
func newOriginReading(t *testing.T, read func(string) (int, error)) *lenientOrigin {
	o := &lenientOrigin{names: map[string]string{}, read: read}
	o.upstream = newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
		o.mu.Lock()
		defer o.mu.Unlock()
		if len(parts) == 1 { // the bulk endpoint
			var elems []map[string]string
			for _, id := range strings.Split(r.URL.Query().Get("ids"), ",") {
				elems = append(elems, map[string]string{"id": id, "name": o.name(parts[0], id)})
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(elems)
			return
		}
		if r.Method == http.MethodPatch {
			b, _ := io.ReadAll(r.Body)
			o.names[o.resource(parts[0], parts[1])] = string(b)
			code := http.StatusNoContent
			if c := r.URL.Query().Get("code"); c != "" {
				code, _ = strconv.Atoi(c)
			}
			if code == http.StatusSeeOther {
				// Post/Redirect/Get: applied, and sent to the resource.
				w.Header().Set("Location", "/"+parts[0]+"/"+parts[1])
			}
			w.WriteHeader(code)
			return
		}
		fmt.Fprint(w, o.name(parts[0], parts[1]))
	})
	return o
}

// resource is the one resource id names: its integer when it reads as
// one, else the slug itself.
func (o *lenientOrigin) resource(kind, id string) string {
	if n, err := o.read(id); err == nil {
		return kind + ":" + strconv.Itoa(n)
	}
	return kind + ":" + id
}

func (o *lenientOrigin) name(kind, id string) string {
	if n := o.names[o.resource(kind, id)]; n != "" {
		return n
	}
	return "old"
}

func patch(t *testing.T, e *env, path, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPatch, e.front.URL+path, strings.NewReader(body))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	e.l1.Wait()
	return resp.StatusCode
}

// A write spelled any way the origin reads as client 5 (README: "Every
// spelling of a write invalidates"; ARCHITECTURE 3: under-invalidation
// serves a lie) drops what /clients/5 and the routes tagged client:5
// stored, whether the write route constrains its id or not.
func TestSpelledWriteInvalidates(t *testing.T) {
	for _, pattern := range []string{"/clients/{id:[1-9][0-9]*}", "/clients/{id}"} {
		for _, spelled := range []string{"/clients/%205", "/clients/5%20", "/clients/%095", "/clients/5-acme", "/clients/+05-acme", "/clients/05"} {
			t.Run(pattern+spelled, func(t *testing.T) {
				o := newLenientOrigin(t)
				write := testRoute{Name: "client-write", Methods: []string{"PATCH"}, Pattern: pattern, Invalidate: []string{"client:{id}"}}
				read := clientRoute
				read.Pattern = pattern
				summary := testRoute{Name: "summary", Pattern: pattern + "/summary", TTL: time.Minute, Tags: []string{"client:{id}"}}
				e := newEnv(t, o.upstream, []testRoute{summary, read, write}, withL1Invalidator)
				for _, p := range []string{"/clients/5", "/clients/5/summary"} {
					if _, b := e.get(p); b != "old" {
						t.Fatalf("first read of %s: %q", p, b)
					}
				}
				if code := patch(t, e, spelled, "new"); code != http.StatusNoContent {
					t.Fatalf("PATCH %s: %d", spelled, code)
				}
				for _, p := range []string{"/clients/5", "/clients/5/summary"} {
					if r, b := e.get(p); b != "new" {
						t.Errorf("%s after PATCH %s = %q (%s), want new", p, spelled, b, r.Header.Get("Cache-Status"))
					}
				}
			})
		}
	}
}

// The storage side, on an unconstrained route: a number with blanks
// around it is not stored (as 05 and +5 are not); a slug the origin reads
// as 5 (Rails' to_param, /clients/5-acme) is stored, tagged as 5's entry
// is, so a write to /clients/5 drops it; a slug that reads as no number
// is stored and untouched by it.
func TestSpelledReadStorage(t *testing.T) {
	for _, tc := range []struct {
		path           string
		stored, change bool
	}{
		{"/clients/%205", false, true},
		{"/clients/5%20", false, true},
		{"/clients/%095", false, true},
		{"/clients/5-acme", true, true},
		{"/clients/5-acme/summary", true, true},
		{"/clients/acme", true, false},
		{"/clients/acme/summary", true, false},
	} {
		t.Run(tc.path, func(t *testing.T) {
			o := newLenientOrigin(t)
			write := testRoute{Name: "client-write", Methods: []string{"PATCH"}, Pattern: "/clients/{id}", Invalidate: []string{"client:{id}"}}
			summary := testRoute{Name: "summary", Pattern: "/clients/{id}/summary", TTL: time.Minute, Tags: []string{"client:{id}"}}
			e := newEnv(t, o.upstream, []testRoute{summary, clientRoute, write}, withL1Invalidator)
			e.get(tc.path)
			if r, _ := e.get(tc.path); strings.Contains(r.Header.Get("Cache-Status"), "hit") != tc.stored {
				t.Errorf("second GET %s: %s, want stored=%v", tc.path, r.Header.Get("Cache-Status"), tc.stored)
			}
			if code := patch(t, e, "/clients/5", "new"); code != http.StatusNoContent {
				t.Fatalf("PATCH: %d", code)
			}
			want := map[bool]string{true: "new", false: "old"}[tc.change]
			if r, b := e.get(tc.path); b != want {
				t.Errorf("GET %s after PATCH /clients/5 = %q (%s), want %s", tc.path, b, r.Header.Get("Cache-Status"), want)
			}
		})
	}
}

// The same rule for the ids of the batch route and of a split list: each
// element stored for an id the origin reads as 5 is dropped by a write to
// /users/5 (tagged user:5 and /users/5's URI), whatever path stored it.
// A list that spells an id otherwise than the cache stores it (05) passes
// through whole (detail=split-spelling, TestSplitListAsAsked): nothing of
// it is stored, and the upstream's own answer follows the write.
func TestSpelledListIDs(t *testing.T) {
	for _, tc := range []struct {
		ask    string
		stored bool
	}{
		{"/users/5-acme", true},
		{"/users?ids=5-acme", true},
		{"/users?ids=05,7", false},
		{"/users?ids=%205,7", true},
		{"/users?ids=7,+5-x", true},
	} {
		ask := tc.ask
		t.Run(ask, func(t *testing.T) {
			o := newLenientOrigin(t)
			user := testRoute{Name: "user", Pattern: "/users/{id}", TTL: time.Minute, Tags: []string{"user:{id}"},
				Batch: &route.Batch{Path: "/users", Param: "ids", IDField: "id", MaxSize: 10, MaxWait: time.Millisecond}}
			list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
			write := testRoute{Name: "user-write", Methods: []string{"PATCH"}, Pattern: "/users/{id}", Invalidate: []string{"user:{id}"}}
			e := newEnv(t, o.upstream, []testRoute{user, list, write}, withL1Invalidator)
			if r, b := e.get(ask); !strings.Contains(b, "old") || r.StatusCode != 200 {
				t.Fatalf("first GET %s: %d %q", ask, r.StatusCode, b)
			}
			if r, _ := e.get(ask); strings.Contains(r.Header.Get("Cache-Status"), "hit") != tc.stored {
				t.Fatalf("second GET %s: %s, want stored=%v", ask, r.Header.Get("Cache-Status"), tc.stored)
			}
			if code := patch(t, e, "/users/5", "new"); code != http.StatusNoContent {
				t.Fatalf("PATCH: %d", code)
			}
			if r, b := e.get(ask); !strings.Contains(b, "new") {
				t.Errorf("GET %s after PATCH /users/5 = %q (%s), want user 5 new", ask, b, r.Header.Get("Cache-Status"))
			}
		})
	}
}

// A write route's invalidate tags drop on every answer after which the
// write may have been applied, as its URIs do: a 303 See Other
// (Post/Redirect/Get, Rails' redirect_to after update), a gateway's 502 or
// 504. Before, they dropped after a 2xx only, and entries tagged client:5
// under other URIs kept the old version for their ttl.
func TestWriteAnswerDropsRouteTags(t *testing.T) {
	for _, code := range []int{http.StatusSeeOther, http.StatusFound, http.StatusBadGateway, http.StatusGatewayTimeout} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			o := newLenientOrigin(t)
			write := testRoute{Name: "client-write", Methods: []string{"PATCH"}, Pattern: "/clients/{id}", Invalidate: []string{"client:{id}"}}
			summary := testRoute{Name: "summary", Pattern: "/clients/{id}/summary", TTL: time.Minute, Tags: []string{"client:{id}"}}
			e := newEnv(t, o.upstream, []testRoute{summary, clientRoute, write}, withL1Invalidator)
			if _, b := e.get("/clients/5/summary"); b != "old" {
				t.Fatalf("first read %q", b)
			}
			if got := patch(t, e, fmt.Sprintf("/clients/5?code=%d", code), "new"); got != code {
				t.Fatalf("PATCH: %d, want %d", got, code)
			}
			if r, b := e.get("/clients/5/summary"); b != "new" {
				t.Errorf("summary after an applied PATCH answered %d = %q (%s), want new", code, b, r.Header.Get("Cache-Status"))
			}
		})
	}
}
