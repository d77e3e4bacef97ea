package proxy

import (
	"testing"
	"unsafe"
)

// A batched miss allocates one lead, which holds its Flight, its answer and
// its result in the batch (coalesce.Group.DoThenIn, batch.Slot): each 8
// bytes more may take every miss to a larger size class, and the exchange
// is copied once per id of a list request (detach). Grow them knowingly.
func TestLeadAndExchangeSizes(t *testing.T) {
	if n := unsafe.Sizeof(lead{}); n > 352 {
		t.Errorf("lead is %d bytes, over the 352-byte size class it fits", n)
	}
	if n := unsafe.Sizeof(exchange{}); n > 384 {
		t.Errorf("exchange is %d bytes, over the 384-byte size class it fits", n)
	}
}
