package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// cpuMeter reports the process's CPU time (user + system, every goroutine
// and the runtime's GC included) per iteration as cpu-ns/op: for a path
// that waits, like a batched miss waiting out its window, ns/op is the
// wait and not the work.
type cpuMeter struct {
	b     *testing.B
	start time.Duration
}

func startCPU(b *testing.B) *cpuMeter {
	return &cpuMeter{b: b, start: processCPU(b)}
}

func (m *cpuMeter) stop() {
	m.b.ReportMetric(float64(processCPU(m.b)-m.start)/float64(m.b.N), "cpu-ns/op")
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// discard is a ResponseWriter that keeps nothing, so the benchmark measures
// the handler and not a recorder's buffers.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkL1Hit is the whole handler on a fresh L1 hit: route match, key,
// lookup, headers, body. Run: go test -run - -bench L1Hit -benchmem ./internal/proxy
func BenchmarkL1Hit(b *testing.B) {
	up := newUpstream(b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("ETag", `"v1"`)
		w.Write(make([]byte, 512))
	})
	e := newEnv(b, up, []testRoute{clientRoute})
	e.get("/clients/42")
	req := httptest.NewRequest("GET", e.front.URL+"/clients/42", nil)
	req.Header.Set("Accept", "application/json")
	w := &discard{h: make(http.Header, 8)}
	e.h.ServeHTTP(w, req)
	if w.h.Get("Cache-Status") == "" || up.calls.Load() != 1 {
		b.Fatalf("not a hit: %v", w.h)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		clear(w.h)
		e.h.ServeHTTP(w, req)
	}
}

func BenchmarkL1HitParallel(b *testing.B) {
	up := newUpstream(b, func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, 512)) })
	e := newEnv(b, up, []testRoute{clientRoute})
	e.get("/clients/42")
	if up.calls.Load() != 1 {
		b.Fatal("warm-up missed")
	}
	b.ReportAllocs()
	defer func() {
		if up.calls.Load() != 1 {
			b.Fatalf("upstream saw %d calls: not all hits", up.calls.Load())
		}
	}()
	cpu := startCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest("GET", e.front.URL+"/clients/42", nil)
		w := &discard{h: make(http.Header, 8)}
		for pb.Next() {
			clear(w.h)
			e.h.ServeHTTP(w, req)
		}
	})
	b.StopTimer()
	cpu.stop()
}

// BenchmarkPassThrough is an unrouted GET through the handler to a real
// upstream socket: the pass-through path's own cost, per request.
// Run: go test -run - -bench PassThrough -benchmem ./internal/proxy
func BenchmarkPassThrough(b *testing.B) {
	body := make([]byte, 512)
	up := newUpstream(b, func(w http.ResponseWriter, r *http.Request) { w.Write(body) })
	e := newEnv(b, up, []testRoute{clientRoute})
	b.ReportAllocs()
	cpu := startCPU(b) // the upstream's own CPU included, as its allocations are
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest("GET", e.front.URL+"/other", nil)
		w := &discard{h: make(http.Header, 8)}
		for pb.Next() {
			clear(w.h)
			e.h.ServeHTTP(w, req)
		}
	})
	b.StopTimer()
	cpu.stop()
}

// BenchmarkDirect is the baseline for BenchmarkPassThrough: the same
// upstream called with a plain client, no sidecar.
func BenchmarkDirect(b *testing.B) {
	body := make([]byte, 512)
	up := newUpstream(b, func(w http.ResponseWriter, r *http.Request) { w.Write(body) })
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Get(up.URL + "/other")
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
