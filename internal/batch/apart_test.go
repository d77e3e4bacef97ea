package batch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
)

// apartFetch fails every call of more than max ids with ErrApart (an
// answer too large for its ids together) and answers the others.
type apartFetch struct {
	max   int
	mu    sync.Mutex
	calls [][]string
}

func (f *apartFetch) fetch(_ context.Context, _ string, ids []string) (map[string]string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, append([]string(nil), ids...))
	f.mu.Unlock()
	if len(ids) > f.max {
		return nil, fmt.Errorf("answer of %d ids too large: %w", len(ids), ErrApart)
	}
	m := make(map[string]string, len(ids))
	for _, id := range ids {
		m[id] = "v:" + id
	}
	return m, nil
}

// TestApartRetriesEachRequestNeverHalves: a shared call whose answer is
// too large for its ids together (ErrApart) is retried once per client
// request: each one-id request gets its value from a call of its own
// (two calls, Budget(1)), and a list's ids go together in one call, which,
// too large again, fails the list's ids with the error rather than being
// halved: the list is too large whole, and halving only spent calls.
func TestApartRetriesEachRequestNeverHalves(t *testing.T) {
	const solo, listN = 6, 8
	f := &apartFetch{max: 1}
	l := New(Options{MaxSize: solo + listN, MaxWait: never}, f.fetch)
	defer l.Close()
	out := make(chan outcome, solo+listN)
	for i := range solo {
		go load(l, context.Background(), "g", "", strconv.Itoa(i), out)
	}
	req := l.Requester(listN)
	for i := range listN {
		go func(id string) {
			v, found, err := l.LoadAs(context.Background(), req, "g", "", id)
			out <- outcome{id, v, found, err}
		}("L" + strconv.Itoa(i))
	}
	for range solo + listN {
		o := recv(t, out)
		list := o.id[0] == 'L'
		switch {
		case !list && (o.err != nil || o.v != "v:"+o.id):
			t.Errorf("one-id request %s got (%q, %v), want its value", o.id, o.v, o.err)
		case list && !errors.Is(o.err, ErrApart):
			t.Errorf("list id %s got (%q, %v), want the list's ErrApart", o.id, o.v, o.err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// The shared call, one per one-id request, one for the list.
	if len(f.calls) != 1+solo+1 {
		t.Errorf("%d calls %v, want %d: the shared one, one per one-id request, the list's own", len(f.calls), f.calls, 1+solo+1)
	}
	for _, c := range f.calls[1:] {
		if len(c) != 1 && len(c) != listN {
			t.Errorf("retry of %v: neither one request's id nor the list's whole", c)
		}
	}
}
