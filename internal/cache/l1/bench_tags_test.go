package l1

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
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

// BenchmarkSetBatchedMiss is the L1 write of a batched miss as the proxy
// makes it (entryTags, then surrogate.EntryURITags): a key never stored
// before, under the route's tag, which every entry of the route shares, a
// tag of its own and its URI's tag, into a store that fills (its index
// maps grow). The entries are built, and each round's store made, outside
// the timer, so the figure is Set's own.
func BenchmarkSetBatchedMiss(b *testing.B) {
	const n = 1 << 16
	ctx := context.Background()
	keys := make([]string, n)
	entries := make([]*cache.Entry, n)
	for i := range n {
		id := strconv.Itoa(100000 + i)
		keys[i] = "GET example.com/users/" + id
		entries[i] = entry(`{"id":`+id+`}`, time.Hour, "_route:user", "user:"+id, "uri:/users/"+id)
	}
	var s *Store
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%n == 0 {
			b.StopTimer()
			if s != nil {
				s.Close()
			}
			s = newStore(b, Options{MaxBytes: 1 << 30})
			b.StartTimer()
		}
		_ = s.Set(ctx, keys[i%n], entries[i%n])
		i++
	}
}
