package guess

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestGetPut: a guess is found as put, a key without tags has an empty
// one (ok), a key never put has none, and a later put replaces the guess.
func TestGetPut(t *testing.T) {
	g := New()
	g.Put("a", []string{"v:t1", "v:t2"})
	g.Put("none", []string{})
	if eks, ok := g.Get("a"); !ok || !slices.Equal(eks, []string{"v:t1", "v:t2"}) {
		t.Fatalf("Get(a) = %q, %v", eks, ok)
	}
	if eks, ok := g.Get("none"); !ok || len(eks) != 0 {
		t.Fatalf("Get(none) = %q, %v; want an empty guess", eks, ok)
	}
	if _, ok := g.Get("missing"); ok {
		t.Fatal("a guess for a key never put")
	}
	g.Put("a", []string{"v:t3"})
	if eks, ok := g.Get("a"); !ok || !slices.Equal(eks, []string{"v:t3"}) {
		t.Fatalf("Get(a) after a second Put = %q, %v", eks, ok)
	}
	if n, _ := g.Size(); n != 2 {
		t.Fatalf("%d guesses held, want 2", n)
	}
}

// TestBounded: however many guesses are put, the table holds at most
// Slots of them and Bytes of their cost, and most of what fits.
func TestBounded(t *testing.T) {
	g := New()
	for i := range 3 * Slots {
		g.Put(fmt.Sprint("short", i), []string{fmt.Sprint("v:tag", i)})
	}
	if n, _ := g.Size(); n > Slots || n < Slots/2 {
		t.Fatalf("%d guesses held after %d; want at most %d (and most of them)", n, 3*Slots, Slots)
	}
	big := strings.Repeat("x", 1<<10)
	for i := range 3 * Bytes / (2 << 10) {
		g.Put(fmt.Sprint("big", i), []string{fmt.Sprint(i, big), fmt.Sprint(big, i)})
	}
	if n, size := g.Size(); size > Bytes || size < Bytes/2 {
		t.Fatalf("%d guesses of %d bytes held; want at most %d (and most of them)", n, size, Bytes)
	}
}
