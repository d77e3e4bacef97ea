package batch

import (
	"context"
	"testing"
)

// TestSpend: the calls a list's ids cause outside the loader (the proxy's
// own calls for ids whose answer was made for another request) come out of
// the list's ListBudget, keeping what its first calls still need; a request of
// one id (nil) has no account.
func TestSpend(t *testing.T) {
	l := NewList(Options{MaxSize: 4}, func(context.Context, string, []string) ([]string, error) { return nil, nil })
	defer l.Close()
	cases := []struct {
		name  string
		req   *Requester
		spend []int
		want  []bool
	}{
		{"one id", nil, []int{1, 1, 100}, []bool{true, true, true}},
		// Budget(2) = 4, one first call set aside: 3 to spend.
		{"list of 2", l.Requester(2), []int{2, 1, 1}, []bool{true, true, false}},
		// ListBudget(8, 4) = 7, two first calls (max_size 4) set aside.
		{"list of 8", l.Requester(8), []int{6, 5, 1}, []bool{false, true, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i, n := range tc.spend {
				if got := l.Spend(tc.req, n); got != tc.want[i] {
					t.Errorf("Spend(%d) #%d = %v, want %v", n, i, got, tc.want[i])
				}
			}
		})
	}
}
