package bufpool_test

import (
	"net/http/httputil"
	"testing"

	"github.com/sidecache/sidecache/internal/bufpool"
)

var _ httputil.BufferPool = bufpool.Pool{}

// TestTakeReturn: every buffer is Size bytes, and one taken and returned
// costs no allocation (a pooled buffer survives a sync.Pool round unless
// the collector runs or the race detector drops it).
func TestTakeReturn(t *testing.T) {
	bp := bufpool.New()
	if b := bp.Get(); len(b) != bufpool.Size {
		t.Fatalf("Get: %d bytes, want %d", len(b), bufpool.Size)
	}
	b := bp.Take()
	if len(*b) != bufpool.Size {
		t.Fatalf("Take: %d bytes, want %d", len(*b), bufpool.Size)
	}
	bp.Return(b)
	if raceEnabled {
		t.Skip("the race detector drops pooled items at random")
	}
	if n := testing.AllocsPerRun(100, func() { bp.Return(bp.Take()) }); n != 0 {
		t.Errorf("Take and Return: %.0f allocations, want 0", n)
	}
}
