package proxy_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/proxy"
)

func withTagHeaders(strip bool) envOpt {
	return func(o *proxyOptions, _ *l1.Store) {
		o.TagHeaders = proxy.TagHeaders{Names: []string{"Surrogate-Key", "xkey"}, Strip: strip}
	}
}

// The upstream's Surrogate-Key and xkey headers tag the stored entry: a
// purge of any of those keys drops it, as a purge of a config tag does.
// Without tag headers (the old code) none of these purges dropped anything.
func TestUpstreamTagsPurge(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Surrogate-Key", "client-7  clients")
		w.Header().Add("Xkey", "k1, k2")
		w.Header().Add("Xkey", "k3")
		fmt.Fprint(w, "x")
	})
	for _, tag := range []string{"client-7", "clients", "k1", "k2", "k3", "client:7", "_route:client", "_uri:/clients/7"} {
		t.Run(tag, func(t *testing.T) {
			e := newEnv(t, up, []testRoute{clientRoute}, withTagHeaders(true))
			e.get("/clients/7")
			e.get("/clients/8") // carries the same upstream keys: dropped too
			if r, _ := e.get("/clients/7"); !strings.Contains(r.Header.Get("Cache-Status"), "hit") {
				t.Fatalf("not stored: %q", r.Header.Get("Cache-Status"))
			}
			e.h.Invalidated(tag)
			if n := e.l1.DeleteTags(tag); n == 0 {
				t.Fatalf("purge of %q dropped nothing", tag)
			}
			before := e.up.calls.Load()
			if r, _ := e.get("/clients/7"); !strings.Contains(r.Header.Get("Cache-Status"), "fwd=miss") {
				t.Fatalf("after purge of %q: %q, want a miss", tag, r.Header.Get("Cache-Status"))
			}
			if n := e.up.calls.Load() - before; n != 1 {
				t.Fatalf("upstream calls after purge = %d, want 1", n)
			}
		})
	}
}

// Tag headers are stripped before any client sees them — miss, hit and
// pass-through alike — unless Strip is off; the answer itself is unchanged.
func TestUpstreamTagsStripped(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Surrogate-Key", "a b")
		w.Header().Set("Xkey", "c")
		w.Header().Set("X-Other", "kept")
		fmt.Fprint(w, "x")
	})
	for _, strip := range []bool{true, false} {
		t.Run(fmt.Sprint("strip=", strip), func(t *testing.T) {
			e := newEnv(t, up, []testRoute{clientRoute}, withTagHeaders(strip))
			for _, p := range []string{"/clients/1", "/clients/1", "/uncached"} {
				r, b := e.get(p)
				if b != "x" || r.Header.Get("X-Other") != "kept" {
					t.Fatalf("%s: %q %v", p, b, r.Header)
				}
				got := r.Header.Get("Surrogate-Key") != "" || r.Header.Get("Xkey") != ""
				if got == strip {
					t.Errorf("%s (%s): Surrogate-Key %q xkey %q with strip=%v", p, r.Header.Get("Cache-Status"), r.Header.Get("Surrogate-Key"), r.Header.Get("Xkey"), strip)
				}
			}
		})
	}
}

// An upstream can misbehave: too many keys, or one too long (the transport
// refuses control characters), and the answer is served but not stored (an entry
// stored without one of its keys would survive a purge of it). Reserved
// keys ("_…") are ignored, not a reason to refuse.
func TestUpstreamTagsBounded(t *testing.T) {
	many := make([]string, 33)
	for i := range many {
		many[i] = fmt.Sprint("k", i)
	}
	tests := []struct {
		name, keys string
		stored     bool
	}{
		{"32 keys", strings.Join(many[:32], " "), true},
		{"32 keys, repeated", strings.Join(many[:32], " ") + " k0 k31", true},
		{"33 keys", strings.Join(many, " "), false},
		{"256 bytes", strings.Repeat("a", 256), true},
		{"257 bytes", strings.Repeat("a", 257), false},
		{"reserved ignored", "_route:other _uri:/x ok", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header()["Surrogate-Key"] = []string{tc.keys}
				fmt.Fprint(w, "x")
			})
			e := newEnv(t, up, []testRoute{clientRoute}, withTagHeaders(true))
			for range 2 {
				if r, b := e.get("/clients/1"); r.StatusCode != 200 || b != "x" {
					t.Fatalf("%d %q", r.StatusCode, b)
				}
			}
			if want := map[bool]int64{true: 1, false: 2}[tc.stored]; up.calls.Load() != want {
				t.Fatalf("upstream calls = %d, want %d (stored=%v)", up.calls.Load(), want, tc.stored)
			}
			if tc.name == "reserved ignored" && e.l1.DeleteTags("_route:other", "_uri:/x") != 0 {
				t.Fatal("an upstream key took a reserved tag")
			}
		})
	}
}

// Each element of a bulk answer carries the whole answer's keys: the
// sidecar cannot tell which key names which element, and dropping too much
// costs a miss where dropping too little would serve a purged answer.
func TestUpstreamTagsBulkElements(t *testing.T) {
	all := usersAnswer(func(string) bool { return true })
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		w.Header().Set("Surrogate-Key", "users")
		all(w, r, ids)
	})
	e := newEnv(t, o.upstream, []testRoute{userRoute(100, 5*time.Millisecond)}, withTagHeaders(true))
	r, b := e.get("/users/7")
	if r.StatusCode != 200 || r.Header.Get("Surrogate-Key") != "" {
		t.Fatalf("%d %q %v", r.StatusCode, b, r.Header)
	}
	for _, tag := range []string{"users", "_uri:/users/7"} {
		if n := e.l1.DeleteTags(tag); n != 1 {
			t.Fatalf("purge of %q dropped %d entries, want the element", tag, n)
		}
		e.get("/users/7")
	}
}

// TestUpstreamTagsEveryBulkElement: the elements of one bulk answer share
// one header map, stripped of the tag headers once (elementHeads): every
// element, not only the first, still carries the answer's keys.
func TestUpstreamTagsEveryBulkElement(t *testing.T) {
	all := usersAnswer(func(string) bool { return true })
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		w.Header().Set("Surrogate-Key", "users")
		all(w, r, ids)
	})
	e := newEnv(t, o.upstream, []testRoute{userRoute(100, 50*time.Millisecond)}, withTagHeaders(true))
	paths := userPaths(1, 6)
	for _, a := range fetchAll(e, paths, nil) {
		if a.err != nil || a.code != 200 {
			t.Fatalf("%d %v", a.code, a.err)
		}
	}
	e.l1.Wait()
	if n := e.l1.DeleteTags("users"); n != len(paths) {
		t.Fatalf("purge of the answer's key dropped %d entries, want all %d elements (%d bulk calls)", n, len(paths), len(o.snapshot()))
	}
}
