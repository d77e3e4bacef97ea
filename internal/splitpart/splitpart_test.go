package splitpart_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/sidecache/sidecache/internal/bulkanswer"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/splitpart"
	"github.com/sidecache/sidecache/internal/upfail"
)

func entry(status int, body string) *cache.Entry {
	return &cache.Entry{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)}
}

func TestAsAsked(t *testing.T) {
	for list, want := range map[string]string{"1,2,3": "", "5,5": "split-repeat", "05": "split-spelling", "+5,6": "split-spelling"} {
		ids := strings.Split(list, ",")
		if list == "5,5" {
			ids = ids[:1] // bulk.ParseIDs: distinct
		}
		if got := splitpart.AsAsked(list, ids); got != want {
			t.Errorf("AsAsked(%q) = %q, want %q", list, got, want)
		}
	}
}

// TestSettle: a failure or a 5xx serves the stale copy held; a record
// too large to keep never does; without a copy the failure stays.
func TestSettle(t *testing.T) {
	held := entry(200, `{"id":1,"v":"old"}`)
	p := splitpart.Part[int]{Held: held}
	p.Settle(entry(503, "down"), nil)
	if p.E != held || !p.Stale || p.Err != nil {
		t.Errorf("5xx with a held copy: %+v", p)
	}
	p = splitpart.Part[int]{Held: held}
	p.Settle(nil, bulkanswer.ErrAnswerTooLarge)
	if p.E != nil || !errors.Is(p.Err, bulkanswer.ErrElementTooLarge) {
		t.Errorf("too large with a held copy: %+v", p)
	}
	p = splitpart.Part[int]{}
	p.Settle(entry(500, "x"), nil)
	var ue *upfail.Error
	if p.E != nil || !errors.As(p.Err, &ue) || ue.Code != http.StatusBadGateway {
		t.Errorf("5xx without a copy: %+v", p)
	}
}

// TestFetch: each missing part is fetched and settled; one answered for
// another request is left Foreign; a panic is the id's 502; the
// elements past the limit are dropped for a too-large list.
func TestFetch(t *testing.T) {
	parts := splitpart.Parts[string]{
		"1": {X: "1", E: entry(200, `{"id":1}`)},
		"2": {X: "2"}, "3": {X: "3"}, "4": {X: "4"},
	}
	fetched := make(chan string, 4)
	var logged []any
	parts.Fetch(context.Background(), 1<<20, func(_ context.Context, id string) (*cache.Entry, bool, error) {
		fetched <- id
		switch id {
		case "3":
			return entry(200, `{"id":3}`), true, nil
		case "4":
			panic("boom")
		}
		return entry(200, `{"id":`+id+`}`), false, nil
	}, func(id string, v any, stack []byte) { logged = append(logged, v) })
	close(fetched)
	n := 0
	for id := range fetched {
		if id == "1" {
			t.Error("fetched a part read from the cache")
		}
		n++
	}
	if n != 3 || parts["2"].E == nil || !parts["3"].Foreign || parts["3"].E != nil || len(logged) != 1 {
		t.Fatalf("fetched %d, 2: %+v, 3: %+v, logged %v", n, parts["2"], parts["3"], logged)
	}
	var ue *upfail.Error
	if !errors.As(parts["4"].Err, &ue) || ue.Code != http.StatusBadGateway || strings.Contains(ue.Error(), "goroutine") {
		t.Errorf("panicked id: %v", parts["4"].Err)
	}

	big := splitpart.Parts[string]{"1": {X: "1"}, "2": {X: "2"}}
	big.Fetch(context.Background(), 20, func(_ context.Context, id string) (*cache.Entry, bool, error) {
		return entry(200, `{"id":`+id+`,"pad":1}`), false, nil
	}, nil)
	if a, b := big["1"].Err, big["2"].Err; (a == nil) == (b == nil) || !errors.Is(errors.Join(a, b), bulkanswer.ErrElementTooLarge) {
		t.Errorf("over the limit: one element is dropped for the list: %v, %v", a, b)
	}
}

// TestJoin: the list in the order asked, the unknown left out; the first
// refused or failed id fails it.
func TestJoin(t *testing.T) {
	parts := splitpart.Parts[int]{
		"3": {E: entry(200, `{"id":3}`)},
		"1": {E: entry(200, `{"id":1}`), Stale: true},
		"2": {E: entry(404, `{"error":"not found"}`)},
	}
	l, stale, bad := parts.Join([]string{"3", "9", "1", "2"})
	if bad != nil || stale != 1 || string(l.Answer().Body) != `[{"id":3},{"id":1}]` {
		t.Errorf("Join: %q, stale %d, bad %+v", l.Answer().Body, stale, bad)
	}
	parts["1"] = &splitpart.Part[int]{E: entry(422, `{"error":"bad id"}`)}
	if _, _, bad := parts.Join([]string{"3", "1", "2"}); bad != parts["1"] {
		t.Errorf("a refused id: bad %+v", bad)
	}
	if n := parts.Bytes(); n != int64(len(`{"id":3}`)+1) {
		t.Errorf("Bytes = %d", n)
	}
}
