package l1

import (
	"testing"
	"time"
)

// Ristretto holds the items under their keys' hashes alone (Store.c), so
// with every key hashed alike (the index's hash narrowed to nothing) a key
// never stored finds another key's item there: Get must not serve it, and
// Delete of that key must not drop it from ristretto, where the index
// keeps it live (its bytes would stay counted, past ristretto's bound).
func TestKeysOfOneHash(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{})
	s.hashMask = 0
	a := entry("a", time.Hour, "_route:x")
	set(t, s, "a", a)
	s.Wait()
	if got := get(t, s, "b"); got != nil {
		t.Fatalf("Get(b) = %q, the entry of a, which shares its hash", got.Body)
	}
	if err := s.Delete(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
	s.Wait()
	if it, ok := s.c.Get(s.hash("a")); !ok || it.key != "a" {
		t.Fatalf("ristretto lost a's item after Delete(b) (ok %v)", ok)
	}
	if got := get(t, s, "a"); got != a {
		t.Fatalf("Get(a) = %v, want its entry", got)
	}
	if s.Items() != 1 {
		t.Fatalf("Items() = %d, want 1", s.Items())
	}
	checkIndex(t, s)
}
