package splitpart

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sidecache/sidecache/internal/cache"
)

func element(status, n int) *cache.Entry {
	return &cache.Entry{Status: status, Body: []byte(strings.Repeat("x", n))}
}

// TestWithinForgetsWhatItDrops: an element dropped for the bound is no
// longer counted, so the parts settled after it are judged by what the
// list holds. Here 11 + 16 = 27 bytes of a bound of 30 are kept around
// the 26 of the one dropped; counted still, the dropped bytes refused the
// third element too, and held said 53 for a list holding 27.
func TestWithinForgetsWhatItDrops(t *testing.T) {
	var held atomic.Int64
	const limit = 30
	b := &Part[string]{E: element(http.StatusOK, 10)}
	a := &Part[string]{E: element(http.StatusOK, 25)}
	c := &Part[string]{E: element(http.StatusOK, 15)}
	for _, p := range []*Part[string]{b, a, c} {
		p.within(&held, limit)
	}
	if !errors.Is(a.Err, errListTooLarge) || a.E != nil {
		t.Fatalf("the element past the bound: %+v, want dropped", a)
	}
	if b.Err != nil || c.Err != nil || b.E == nil || c.E == nil {
		t.Errorf("elements within the bound once the other was dropped: %v, %v; want both kept", b.Err, c.Err)
	}
	if got := held.Load(); got != 27 {
		t.Errorf("held %d bytes, want 27 (what the list keeps)", got)
	}
}

// TestWithinKeepsWhatAddsNothing: a refused id (422) or one left out
// (404) adds no byte to the list, so it is kept even while held is over
// the bound for a moment (another part's element counted before it is
// dropped): dropping it made the list's answer depend on which goroutine
// settled first (the refusal, first in the order asked, or a pass-through).
func TestWithinKeepsWhatAddsNothing(t *testing.T) {
	var held atomic.Int64
	const limit = 30
	held.Store(limit + 5)
	for _, status := range []int{http.StatusUnprocessableEntity, http.StatusNotFound} {
		p := &Part[string]{E: element(status, 20)}
		p.within(&held, limit)
		if p.Err != nil || p.E == nil {
			t.Errorf("a %d while held is over the bound: %v, want kept", status, p.Err)
		}
	}
	if got := held.Load(); got != limit+5 {
		t.Errorf("held %d, want %d", got, limit+5)
	}
}
