package proxy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/redistest"
)

// l2Bench is the lag a replica allows another's L2 entries in
// BenchmarkL2Hit (coherence.max_lag): short, so the benchmark does not
// wait long for the stored entry to become servable.
const l2BenchLag = 50 * time.Millisecond

// l2Replica is a sidecar with L1 off and a real L2, wired as the server
// wires it (coherence proof, lease).
func l2Replica(b *testing.B, addr string, up *upstream) *env {
	b.Helper()
	st, err := l2.New(context.Background(), l2.Options{
		Addrs:   []string{addr},
		Prefix:  "bench:",
		Timeout: 2 * time.Second,
		MaxLag:  l2BenchLag,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return newEnv(b, up, []testRoute{clientRoute}, func(o *proxyOptions, _ *l1.Store) {
		o.Cache = cache.NewTiered(nil, st, cache.TieredOptions{MaxLag: l2BenchLag, Proven: st.Proven, Floor: st.Floor})
		o.Leaser = st
	})
}

// BenchmarkL2Hit is the whole handler on an L2 hit: a replica with L1 off
// reading an entry another replica stored, as bench's l2 row does. Compare
// with BenchmarkL1Hit. Run:
// go test -run - -bench 'L[12]Hit$' -benchmem ./internal/proxy
func BenchmarkL2Hit(b *testing.B) {
	srv := redistest.Start(b)
	up := newUpstream(b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("ETag", `"v1"`)
		w.Write(make([]byte, 512))
	})
	writer, reader := l2Replica(b, srv.Addr(), up), l2Replica(b, srv.Addr(), up)
	writer.get("/clients/42")
	req := httptest.NewRequest("GET", reader.front.URL+"/clients/42", nil)
	req.Header.Set("Accept", "application/json")
	w := &discard{h: make(http.Header, 8)}
	deadline := time.Now().Add(10 * time.Second)
	for {
		clear(w.h)
		reader.h.ServeHTTP(w, req)
		if strings.Contains(w.h.Get("Cache-Status"), "hit") {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("no L2 hit: %v", w.h)
		}
		time.Sleep(l2BenchLag)
	}
	calls := up.calls.Load()
	b.ReportAllocs()
	b.ResetTimer()
	own := ownCPU(b)
	for b.Loop() {
		clear(w.h)
		reader.h.ServeHTTP(w, req)
	}
	b.StopTimer()
	b.ReportMetric(float64((ownCPU(b)-own).Nanoseconds())/float64(b.N), "cpu-ns/op")
	if up.calls.Load() != calls || !strings.Contains(w.h.Get("Cache-Status"), "hit") {
		b.Fatalf("not all L2 hits: %d upstream calls, %v", up.calls.Load()-calls, w.h)
	}
}

// ownCPU is this process's CPU time (user + system): the handler's and the
// Redis client's share of a read; Redis's own runs in its process.
func ownCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
