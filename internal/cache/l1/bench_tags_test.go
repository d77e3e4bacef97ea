package l1

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// BenchmarkSetPerIDTag is the L1 write of a batched miss: a new key whose
// entry carries its route's tag, shared by every entry of the route, and
// a tag of its own (user:{id}).
func BenchmarkSetPerIDTag(b *testing.B) {
	s := newStore(b, Options{MaxBytes: 256 << 20})
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		id := strconv.Itoa(i % 100000)
		e := entry("{\"id\":"+id+"}", time.Hour, "route:user", "user:"+id)
		_ = s.Set(ctx, "GET example.com/users/"+id, e)
		i++
	}
}
