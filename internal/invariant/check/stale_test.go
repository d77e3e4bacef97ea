package check

import (
	"net/http"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// A 502 to a list of held ids (a client received them, or the replica
// confirmed holding them throughout) is a violation, unless its replica could
// not read what it held while answering it (Unreadable: the coherence
// bound refused a stored entry, or an L2 read failed), which is counted.
func TestCheckHeldUnreadable(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 6, 20, 4, 0, time.UTC)
	list := func(ids ...string) *traffic.Request {
		return &traffic.Request{Kind: "list", Route: "s", Path: "/s", Ids: ids,
			Sent: map[string]string{"lang": "", "tenant": ""}, Who: &traffic.Identity{Name: "bob"}, Hdr: http.Header{}}
	}
	failed := &http.Response{StatusCode: http.StatusBadGateway, Status: "502 Bad Gateway", Header: http.Header{}}
	cases := []struct {
		name       string
		unreadable bool
		noted      time.Time // when the copies were noted held (zero: never)
		confirmed  bool      // the replica held them throughout (GET /cache)
		violations int
		counted    int
	}{
		{"held and readable", false, t0, false, 1, 0},
		{"held, replica could not read", true, t0, false, 0, 1},
		{"held only after the request left", false, t0.Add(2 * time.Second), false, 0, 0},
		{"confirmed held, never received here", false, time.Time{}, true, 1, 0},
		{"confirmed held, replica could not read", true, time.Time{}, true, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch := &Checker{checked: map[string]int{}}
			if !tc.noted.IsZero() {
				ch.noteHeld(list("4", "2"), []origin.Stamp{{ID: "4", Res: "s/4"}, {ID: "2", Res: "s/2"}}, tc.noted.Add(-time.Millisecond), tc.noted)
			}
			q := list("4", "2")
			q.Unreadable, q.HeldAtSend, q.Held = tc.unreadable, tc.confirmed, tc.confirmed
			ch.checkHeld(q, failed, t0.Add(time.Second))
			checked, vs := ch.Result()
			if len(vs) != tc.violations || checked["held-unreadable-s"] != tc.counted {
				t.Errorf("violations %v, held-unreadable-s %d; want %d violations, %d counted", vs, checked["held-unreadable-s"], tc.violations, tc.counted)
			}
		})
	}
}
