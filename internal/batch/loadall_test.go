package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ownArgWaiter is a one-id load's waiter whose isolation retry carries
// its own arg (RetryArger).
type ownArgWaiter struct {
	arg string
	out chan<- outcome
	id  string
}

func (w ownArgWaiter) Loaded(v string, found bool, err error) {
	w.out <- outcome{id: w.id, v: v, found: found, err: err}
}

func (w ownArgWaiter) RetryArg(string) string { return w.arg }

// Ids handed in together go out together: with a window of a
// nanosecond, loads joining one after another leave in a call each, but
// LoadAllTo's ids share the open batch (as many as MaxSize allows).
func TestLoadAllToOneBatch(t *testing.T) {
	for _, c := range []struct{ maxSize, ids, calls int }{{100, 20, 1}, {4, 10, 3}} {
		t.Run(fmt.Sprintf("max_size %d", c.maxSize), func(t *testing.T) {
			var rec recorder
			l := New(Options{MaxSize: c.maxSize, MaxWait: time.Nanosecond}, rec.fetch)
			defer l.Close()
			out := make(chan outcome, c.ids)
			ids := make([]string, c.ids)
			ws := make([]Waiter[string], c.ids)
			for i := range ids {
				ids[i] = strconv.Itoa(i)
				ws[i] = ownArgWaiter{arg: "own" + ids[i], out: out, id: ids[i]}
			}
			l.LoadAllTo(context.Background(), "g", func() string { return "opener" }, ids, ws)
			for range c.ids {
				if o := recv(t, out); o.err != nil || !o.found || o.v != "v:"+o.id {
					t.Errorf("id %s: (%q, %v, %v), want its own value", o.id, o.v, o.found, o.err)
				}
			}
			if calls, _ := rec.snapshot(); len(calls) != c.calls {
				t.Errorf("calls %v, want %d", calls, c.calls)
			}
		})
	}
}

// Each id of a LoadAllTo is a one-id request: a call that fails for a bad
// id is retried per id, each with its waiter's own arg, and only the bad
// id fails.
func TestLoadAllToIsolatesPerID(t *testing.T) {
	var mu sync.Mutex
	var args []string
	l := New(Options{MaxSize: 100, MaxWait: time.Nanosecond}, func(_ context.Context, arg string, ids []string) (map[string]string, error) {
		mu.Lock()
		args = append(args, arg)
		mu.Unlock()
		if slices.Contains(ids, "bad") {
			return nil, fmt.Errorf("%w: bad id", ErrIsolate)
		}
		m := make(map[string]string, len(ids))
		for _, id := range ids {
			m[id] = "v:" + id
		}
		return m, nil
	})
	defer l.Close()
	ids := []string{"a", "bad", "b"}
	out := make(chan outcome, len(ids))
	ws := make([]Waiter[string], len(ids))
	for i, id := range ids {
		ws[i] = ownArgWaiter{arg: "own-" + id, out: out, id: id}
	}
	l.LoadAllTo(context.Background(), "g", func() string { return "opener" }, ids, ws)
	for range ids {
		o := recv(t, out)
		switch {
		case o.id == "bad" && !errors.Is(o.err, ErrIsolate):
			t.Errorf("bad: (%q, %v), want its own failure", o.v, o.err)
		case o.id != "bad" && (o.err != nil || o.v != "v:"+o.id):
			t.Errorf("%s: (%q, %v), want its own value", o.id, o.v, o.err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if args[0] != "opener" || len(args) != 1+len(ids) {
		t.Fatalf("call args %q, want the opener's, then one retry per id", args)
	}
	if retries := slices.Sorted(slices.Values(args[1:])); !slices.Equal(retries, []string{"own-a", "own-b", "own-bad"}) {
		t.Errorf("retry args %q, want each id's own", retries)
	}
}
