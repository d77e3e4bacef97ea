package l2

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

func BenchmarkGetHit(b *testing.B) {
	srv := redistest.Start(b)
	r := newReplica(b, []string{srv.Addr()})
	ctx := context.Background()
	body := string(make([]byte, 1024))
	if err := r.Set(ctx, "k", entry(body, time.Hour, "t")); err != nil {
		b.Fatal(err)
	}
	r.flush(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := r.Get(ctx, "k"); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkGetHitParallel(b *testing.B) {
	srv := redistest.Start(b)
	r := newReplica(b, []string{srv.Addr()})
	ctx := context.Background()
	if err := r.Set(ctx, "k", entry(string(make([]byte, 1024)), time.Hour, "t")); err != nil {
		b.Fatal(err)
	}
	r.flush(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok, err := r.Get(ctx, "k"); err != nil || !ok {
				b.Error(ok, err)
				return
			}
		}
	})
}

// BenchmarkSetWritten measures queued writes as they reach Redis: Set plus
// a Flush at the end, so ns/op is the pipelined write cost per entry.
func BenchmarkSetWritten(b *testing.B) {
	srv := redistest.Start(b)
	r := newReplica(b, []string{srv.Addr()}, func(o *Options) { o.Timeout = time.Second })
	ctx := context.Background()
	e := entry(string(make([]byte, 1024)), time.Hour, "client:1", "route:client")
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N { // not b.Loop: the final Flush must be timed too
		for r.Set(ctx, "k"+strconv.Itoa(i%10000), e) != nil {
			r.flush(b) // queue full: let the writer catch up
		}
	}
	r.flush(b)
}

// BenchmarkInvalidationPropagation measures the documented "reaches every
// replica's L1 within 100 ms" (docs/configuration.md, cache.l2): ns/op is the time from InvalidateTags on one replica to
// OnInvalidate on another.
func BenchmarkInvalidationPropagation(b *testing.B) {
	srv := redistest.Start(b)
	a := newReplica(b, []string{srv.Addr()})
	peer := newReplica(b, []string{srv.Addr()})
	ctx := context.Background()
	for b.Loop() {
		if err := a.InvalidateTags(ctx, "t"); err != nil {
			b.Fatal(err)
		}
		peer.nextInvalidation(b, time.Second)
	}
}
