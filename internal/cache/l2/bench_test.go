package l2

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/redistest"
)

// BenchmarkGetHit is a replica's L2 hit of a 1 KiB entry with two tags,
// stored by another replica, with the CPU Redis spent per read
// (redis-µs/op, from INFO cpu) and this process's (client-µs/op) next to
// BenchmarkPlainGet's.
func BenchmarkGetHit(b *testing.B) {
	srv := redistest.Start(b)
	w := newReplica(b, []string{srv.Addr()})
	r := newReplica(b, []string{srv.Addr()})
	ctx := context.Background()
	body := string(make([]byte, 1024))
	if err := w.Set(ctx, "k", entry(body, time.Hour, "client:1", "route:client")); err != nil {
		b.Fatal(err)
	}
	w.flush(b)
	if _, ok, err := r.Get(ctx, "k"); err != nil || !ok {
		b.Fatal(ok, err)
	}
	rc := raw(b, srv.Addr())
	b.ReportAllocs()
	cpu, own := redisCPU(b, rc), ownCPU(b)
	for b.Loop() {
		if _, ok, err := r.Get(ctx, "k"); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
	b.ReportMetric(float64((redisCPU(b, rc)-cpu).Microseconds())/float64(b.N), "redis-µs/op")
	b.ReportMetric(float64((ownCPU(b)-own).Microseconds())/float64(b.N), "client-µs/op")
}

// BenchmarkPlainGet is the reference for BenchmarkGetHit's redis-µs/op: a
// GET of the value BenchmarkGetHit's entry is stored as, one at a time.
func BenchmarkPlainGet(b *testing.B) {
	srv := redistest.Start(b)
	w := newReplica(b, []string{srv.Addr()})
	ctx := context.Background()
	if err := w.Set(ctx, "k", entry(string(make([]byte, 1024)), time.Hour, "client:1", "route:client")); err != nil {
		b.Fatal(err)
	}
	w.flush(b)
	rc := raw(b, srv.Addr())
	b.ReportAllocs()
	cpu, own := redisCPU(b, rc), ownCPU(b)
	for b.Loop() {
		if err := rc.Get(ctx, "test:e:k").Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((redisCPU(b, rc)-cpu).Microseconds())/float64(b.N), "redis-µs/op")
	b.ReportMetric(float64((ownCPU(b)-own).Microseconds())/float64(b.N), "client-µs/op")
}

// ownCPU is this process's CPU time (user + system): the client's side of
// a read, background goroutines (the stores' probes) included.
func ownCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU is used_cpu_sys + used_cpu_user from INFO cpu.
func redisCPU(b *testing.B, rc *redis.Client) time.Duration {
	b.Helper()
	info, err := rc.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum time.Duration
	for _, f := range []string{"used_cpu_sys:", "used_cpu_user:"} {
		_, rest, _ := strings.Cut(info, f)
		v, err := strconv.ParseFloat(strings.TrimSpace(rest[:strings.IndexByte(rest, '\n')]), 64)
		if err != nil {
			b.Fatal(err)
		}
		sum += time.Duration(v * float64(time.Second))
	}
	return sum
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
