package l1

import (
	"fmt"
	"testing"
	"time"
)

// TestRewriteBeforeApplied: a key written twice before ristretto has
// applied the first write (a 304 refresh or a refill right after a fill)
// keeps the second entry. Ristretto takes both writes as new keys and
// rejects the second (its policy already has the key), and that rejection
// named the live item: both entries were lost until the next write.
func TestRewriteBeforeApplied(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{MaxBytes: 64 << 20})
	const n = 500
	want := make([]any, n)
	for i := range n {
		k := fmt.Sprintf("k%d", i)
		set(t, s, k, entry("one", time.Hour, "t"))
		e := entry("two", time.Hour, "t")
		set(t, s, k, e)
		want[i] = e
	}
	s.Wait()
	lost := 0
	for i := range n {
		if got := get(t, s, fmt.Sprintf("k%d", i)); got == nil || any(got) != want[i] {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d keys written twice in a row lost their second entry", lost, n)
	}
	if got := s.Items(); got != n {
		t.Fatalf("Items() = %d, want %d", got, n)
	}
	if got := s.DeleteTags("t"); got != n {
		t.Fatalf("DeleteTags = %d, want %d", got, n)
	}
	checkIndex(t, s)
}
