package batch

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// A NewList loader gives each id the value at its place in the call's
// ids, found, whatever order the loads joined in.
func TestNewListValuesInIDOrder(t *testing.T) {
	var rec recorder
	l := NewList(Options{MaxSize: 5, MaxWait: never}, func(ctx context.Context, arg string, ids []string) ([]string, error) {
		if _, err := rec.fetch(ctx, arg, ids); err != nil {
			return nil, err
		}
		vals := make([]string, len(ids))
		for i, id := range ids {
			vals[i] = "v:" + id
		}
		return vals, nil
	})
	defer l.Close()
	out := make(chan outcome, 10)
	for i := range 10 {
		go load(l, context.Background(), "g", "", strconv.Itoa(i), out)
	}
	for range 10 {
		if o := recv(t, out); o.err != nil || !o.found || o.v != "v:"+o.id {
			t.Errorf("id %s: (%q, %v, %v), want its own value, found", o.id, o.v, o.found, o.err)
		}
	}
	if calls, _ := rec.snapshot(); len(calls) != 2 {
		t.Errorf("%d calls for 10 ids in batches of 5, want 2", len(calls))
	}
}

// A list fetch that returns more or fewer values than it was given ids
// fails each of them: no id is handed a value that may be another's.
func TestNewListWrongLengthFails(t *testing.T) {
	for _, extra := range []int{-1, 1} {
		l := NewList(Options{MaxSize: 3, MaxWait: never}, func(_ context.Context, _ string, ids []string) ([]string, error) {
			vals := make([]string, len(ids)+extra)
			for i := range vals {
				vals[i] = "v"
			}
			return vals, nil
		})
		out := make(chan outcome, 3)
		for i := range 3 {
			go load(l, context.Background(), "g", "", strconv.Itoa(i), out)
		}
		for range 3 {
			if o := recv(t, out); o.err == nil || o.found || !strings.Contains(o.err.Error(), "values for") {
				t.Errorf("%+d values: id %s got (%q, %v, %v), want an error", extra, o.id, o.v, o.found, o.err)
			}
		}
		l.Close()
	}
}
