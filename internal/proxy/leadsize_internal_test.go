package proxy

import (
	"testing"
	"unsafe"
)

// A batched miss allocates one lead, which holds its Flight, its answer and
// its result in the batch (coalesce.Group.DoThenIn, batch.Slot): each 8
// bytes more may take every miss to a larger size class, and the exchange
// is copied once per id of a list request (detach). Grow them knowingly.
// The lead grew from 352 to 376 bytes (the 384-byte class) when it took
// the request's Redis budget in, and its Flight a value it carries
// (coalesce.Flight.Carry): those were redisbudget.New's context, 24 bytes
// more in an allocation of their own per batched miss.
func TestLeadAndExchangeSizes(t *testing.T) {
	if n := unsafe.Sizeof(lead{}); n > 384 {
		t.Errorf("lead is %d bytes, over the 384-byte size class it fits", n)
	}
	if n := unsafe.Sizeof(exchange{}); n > 384 {
		t.Errorf("exchange is %d bytes, over the 384-byte size class it fits", n)
	}
}
