package bulkmem_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/sidecache/sidecache/internal/bulkmem"
)

// TestHeld: the peak is the most held at once, the largest the most one
// take held.
func TestHeld(t *testing.T) {
	var m bulkmem.Route
	m.Take(10)
	m.Take(30)
	m.Release(10)
	m.Take(5)
	m.Release(30)
	m.Release(5)
	if all, one := m.Peak(); all != 40 || one != 30 {
		t.Errorf("Peak = %d, %d, want 40, 30", all, one)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { m.Take(1); m.Release(1) })
	}
	wg.Wait()
	if all, _ := m.Peak(); all != 40 {
		t.Errorf("Peak after small takes = %d", all)
	}
}

// TestRead: a body is read within the limit (over it as limit+1 bytes),
// into the buffer the last answer gave back.
func TestRead(t *testing.T) {
	var m bulkmem.Route
	body, buf, err := m.Read(strings.NewReader("[1,2,3]"), 7, 100)
	if err != nil || string(body) != "[1,2,3]" {
		t.Fatalf("Read: %q, %v", body, err)
	}
	m.Reuse(buf, body)
	if body, _, _ := m.Read(strings.NewReader("[1,2,3,4,5]"), -1, 4); len(body) != 5 {
		t.Errorf("over the limit: %d bytes, want limit+1", len(body))
	}
}
