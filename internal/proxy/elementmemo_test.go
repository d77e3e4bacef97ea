package proxy_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestElementHeadsFollowEachAnswer: a route's bulk answers reuse the
// element heads of its last answer only when their header is the same
// (bulkelem.Memo). An element gets the fields of its own answer, in their
// order, whether the header before it was the same, another, or private;
// a private answer's elements are not stored even right after a storable
// answer with the same fields but Cache-Control.
func TestElementHeadsFollowEachAnswer(t *testing.T) {
	date := time.Now().UTC().Format(http.TimeFormat)
	type head struct{ gen, cc string }
	var mu sync.Mutex
	next := head{"a", "max-age=300"}
	users := usersAnswer(func(string) bool { return true })
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		mu.Lock()
		h := next
		mu.Unlock()
		w.Header().Set("Date", date)
		w.Header().Set("Cache-Control", h.cc)
		w.Header()["X-Gen"] = strings.Split(h.gen, ",")
		users(w, r, ids)
	})
	e := newEnv(t, o.upstream, []testRoute{userRoute(10, time.Millisecond)})
	steps := []struct {
		id      string
		h       head
		private bool
	}{
		{"1", head{"a", "max-age=300"}, false},
		{"2", head{"a", "max-age=300"}, false}, // the same header: the route's last heads
		{"3", head{"b", "max-age=300"}, false},
		{"4", head{"a,b", "max-age=300"}, false},
		{"5", head{"b,a", "max-age=300"}, false}, // the same values in another order
		{"6", head{"b,a", "max-age=60"}, false},
		{"7", head{"b,a", "private, max-age=60"}, true},
		{"8", head{"b,a", "max-age=60"}, false},
	}
	for _, s := range steps {
		mu.Lock()
		next = s.h
		mu.Unlock()
		resp, _ := e.get("/users/" + s.id)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("id %s: status %d", s.id, resp.StatusCode)
		}
		if got, want := strings.Join(resp.Header.Values("X-Gen"), ","), s.h.gen; got != want {
			t.Errorf("id %s: X-Gen %q, want %q (its own answer's)", s.id, got, want)
		}
		wantCC := s.h.cc
		if s.private {
			wantCC = "private"
		}
		if got := resp.Header.Get("Cache-Control"); got != wantCC && !(s.private && strings.Contains(got, "private")) {
			t.Errorf("id %s: Cache-Control %q, want %q", s.id, got, wantCC)
		}
	}
	calls := len(o.snapshot())
	for _, s := range steps {
		mu.Lock()
		next = head{"z", "max-age=1"}
		mu.Unlock()
		resp, _ := e.get("/users/" + s.id)
		if got := strings.Join(resp.Header.Values("X-Gen"), ","); !s.private && got != s.h.gen {
			t.Errorf("id %s again: X-Gen %q, want %q (stored from its own answer)", s.id, got, s.h.gen)
		}
	}
	if got, want := len(o.snapshot())-calls, 1; got != want {
		t.Errorf("%d bulk calls for the ids again, want %d (the private one's)", got, want)
	}
}
