package bulkelem_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/bulkelem"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/forward"
	"github.com/sidecache/sidecache/internal/surrogate"
	"github.com/sidecache/sidecache/internal/tombstone"
)

func never(string) bool { return false }

// TestVary: the names a bulk answer's Vary gives its elements, or why
// none of them may be stored, for each kind of header it names.
func TestVary(t *testing.T) {
	for _, tc := range []struct {
		vary   string
		all    bool // the route forwards every header
		opener http.Header
		names  []string
		reason string
	}{
		{vary: "*", reason: bulkelem.VaryStar},
		{vary: "Accept-Encoding, Accept"},
		{vary: "Accept-Language", names: []string{"Accept-Language"}},
		{vary: "User-Agent", all: true, reason: bulkelem.VaryPerRequest},
		{vary: "User-Agent", names: []string{"User-Agent"}},
		{vary: "Via", reason: bulkelem.VaryPerRequest},
		{vary: "X-Tenant", names: []string{"X-Tenant"}},
		{vary: "X-Tenant", opener: http.Header{"X-Tenant": {"a"}}, reason: bulkelem.VaryWithheld},
	} {
		opener := tc.opener
		if opener == nil {
			opener = http.Header{}
		}
		r := forward.New(forward.Config{Route: "users", All: tc.all, Keyed: []string{"Accept-Language"}, Never: never})
		names, reason := bulkelem.Vary(r, never, opener, http.Header{"Vary": {tc.vary}}, http.Header{})
		if reason != tc.reason || len(names) != len(tc.names) || len(names) > 0 && names[0] != tc.names[0] {
			t.Errorf("Vary: %s, opener %v: %q %q, want %q %q", tc.vary, tc.opener, names, reason, tc.names, tc.reason)
		}
		if tc.reason == bulkelem.VaryWithheld && !r.Forwards("X-Tenant") {
			t.Errorf("Vary: %s: the route did not learn the withheld header", tc.vary)
		}
	}
}

// The bulk call's User-Agent and the opener's are read as they go on the
// wire (forward.OnWire), as the per-key fill reads them: the call's empty
// User-Agent (upreq's mark that keeps Go's own off) sends none, so an
// opener with one was withheld it; an opener with an empty one carried
// none a fetch could send, so the elements made without one are its
// variant, as its own fetch's would be, and the route learns nothing from
// it. On the old code an empty one counted as carried: the elements were
// never stored for it, and it taught the route to forward User-Agent.
func TestVaryUserAgentOnTheWire(t *testing.T) {
	sent := http.Header{"User-Agent": {""}}
	for _, tc := range []struct {
		opener http.Header
		names  []string
		reason string
	}{
		{opener: http.Header{"User-Agent": {"mobile/1.0"}}, reason: bulkelem.VaryWithheld},
		{opener: http.Header{"User-Agent": {""}}, names: []string{"User-Agent"}},
		{opener: http.Header{}, names: []string{"User-Agent"}},
	} {
		r := forward.New(forward.Config{Route: "users", Never: never})
		names, reason := bulkelem.Vary(r, never, tc.opener, http.Header{"Vary": {"User-Agent"}}, sent)
		if reason != tc.reason || len(names) != len(tc.names) || len(names) > 0 && names[0] != tc.names[0] {
			t.Errorf("opener %q: %q %q, want %q %q", tc.opener, names, reason, tc.names, tc.reason)
		}
		if learned := r.Forwards("User-Agent"); learned != (tc.reason == bulkelem.VaryWithheld) {
			t.Errorf("opener %q: the route forwards User-Agent: %v", tc.opener, learned)
		}
	}
}

// TestMemo: an answer whose header is the last one's but for its
// Content-Length gets the same shared header maps; another header, or a
// private one, does not.
func TestMemo(t *testing.T) {
	var m bulkelem.Memo
	tags := surrogate.New(surrogate.Config{Names: []string{"Surrogate-Key"}, Strip: true})
	t0 := time.Unix(1_700_000_000, 0)
	now := func() time.Time { return t0 }
	up := http.Header{"Cache-Control": {"max-age=60"}, "Content-Type": {"application/json"}, "Surrogate-Key": {"u"}, "Content-Length": {"10"}}
	a := m.Heads(up, nil, "", false, &tags, t0, now)
	if a.Reason != "" || a.Shared[0] == nil || a.Stored[0]["Surrogate-Key"] != nil || a.Shared[0]["Surrogate-Key"] == nil {
		t.Fatalf("first answer: reason %q, shared %v, stored %v", a.Reason, a.Shared[0], a.Stored[0])
	}
	up2 := up.Clone()
	up2["Content-Length"] = []string{"20"}
	if b := m.Heads(up2, nil, "", false, &tags, t0, now); b.Elements != a.Elements {
		t.Error("same header but for Content-Length: heads not reused")
	}
	up3 := up.Clone()
	up3["Cache-Control"] = []string{"max-age=30"}
	if c := m.Heads(up3, nil, "", false, &tags, t0, now); c.Elements == a.Elements {
		t.Error("another Cache-Control: the last heads reused")
	}
	up4 := up.Clone()
	up4["Cache-Control"] = []string{"private, max-age=60"}
	if d := m.Heads(up4, nil, "", false, &tags, t0, now); d.Reason != bulkelem.Private {
		t.Errorf("private answer: reason %q", d.Reason)
	}
	if e := m.Heads(up, nil, bulkelem.VaryStar, false, &tags, t0, now); e.Reason != bulkelem.VaryStar || e.Shared[0] != nil {
		t.Errorf("a reason given: %q, shared %v", e.Reason, e.Shared[0])
	}
}

// failing is a cache without SetMany whose writes of one key fail.
type failing struct {
	bad  string
	keys []string
}

func (f *failing) Set(_ context.Context, key string, _ *cache.Entry) error {
	f.keys = append(f.keys, key)
	if key == f.bad {
		return errors.New("refused")
	}
	return nil
}

// TestSetsStore: the writes are made in order; a failed write is told
// with its answer, a marker's is not, and an entry a tombstone refuses
// is not written.
func TestSetsStore(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	tombs := tombstone.New(time.Minute)
	tombs.Add(t0, "gone")
	entry := func(tag string) *cache.Entry {
		return &cache.Entry{Status: 200, StoredAt: t0.Add(-time.Second), Tags: []string{tag}}
	}
	s := bulkelem.NewSets()
	s.Cur = 0
	s.Add("m", entry("a"), -1)
	s.Add("k0", entry("a"), 0)
	s.Cur = 1
	s.Add("k1", entry("gone"), 1)
	s.Add("k2", entry("b"), 2)
	c := &failing{bad: "k2"}
	var failed []int
	s.Store(context.Background(), c, tombs, func() time.Time { return t0 }, func(owner int, key string, err error) {
		failed = append(failed, owner)
	})
	if len(c.keys) != 3 || c.keys[0] != "m" || c.keys[1] != "k0" || c.keys[2] != "k2" {
		t.Errorf("writes %q, want m, k0, k2", c.keys)
	}
	if len(failed) != 2 || failed[0] != 1 || failed[1] != 2 {
		t.Errorf("failed %v, want [1 2]", failed)
	}
}
