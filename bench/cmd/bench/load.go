package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The load generator is a small closed-loop client in the style of wrk:
// each worker owns one keep-alive connection, writes a preformatted
// HTTP/1.1 request and parses the answer with http.ReadResponse. It skips
// net/http.Client's pool and goroutine hand-offs, so on a 2-core machine
// shared with the server under test it leaves more CPU to that server.
//
// Vegeta (in go.mod as a tool) was the first choice, but its attacker adds
// an X-Vegeta-Seq header that differs on every request, which would keep a
// proxy that batches only requests with equal forwarded headers from ever
// forming a batch; and its central pacer costs CPU per request.

// target is one request to send.
type target struct {
	method, path string
	body         []byte
}

// targeter picks the next request, drawing from the worker's rng.
type targeter func(rng *rand.Rand) target

// keyDist draws keys 1..n from the rng it was made with.
type keyDist func() int

// newKeyDist returns a maker of key draws over 1..n; each worker makes
// its own on its own rng.
func newKeyDist(name string, n int) (func(rng *rand.Rand) keyDist, error) {
	switch name {
	case "uniform":
		return func(rng *rand.Rand) keyDist {
			return func() int { return 1 + rng.IntN(n) }
		}, nil
	case "zipf":
		// s=1.1, a common web-cache skew: key 1 is the hottest.
		return func(rng *rand.Rand) keyDist {
			z := rand.NewZipf(rng, 1.1, 1, uint64(n-1))
			return func() int { return 1 + int(z.Uint64()) }
		}, nil
	}
	return nil, fmt.Errorf("unknown -dist %q (uniform or zipf)", name)
}

// outcome is what one attack measured.
type outcome struct {
	Elapsed   time.Duration
	OK        int
	Errors    int
	Hits      int // responses whose Cache-Status (RFC 9211) says hit
	Codes     map[int]int
	FirstErr  string
	Latencies []time.Duration // every answered request, sorted
	Dropped   int             // open loop: ticks the workers could not take
}

func (o *outcome) TPS() float64 {
	if o.Elapsed <= 0 {
		return 0
	}
	return float64(o.OK) / o.Elapsed.Seconds()
}

func (o *outcome) Mean() time.Duration {
	if len(o.Latencies) == 0 {
		return 0
	}
	var sum time.Duration
	for _, l := range o.Latencies {
		sum += l
	}
	return sum / time.Duration(len(o.Latencies))
}

// Quantile is the nearest-rank quantile of the answered requests.
func (o *outcome) Quantile(q float64) time.Duration {
	return quantile(o.Latencies, q)
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// attack describes one run.
type attack struct {
	addr     string // host:port
	workers  int
	duration time.Duration
	rate     int                           // 0: closed loop, as fast as the workers go; >0: open loop
	next     func(rng *rand.Rand) targeter // one per worker, on its rng
	ok       func(code int) bool
}

// workerStats is kept per worker and merged at the end: no shared state on
// the hot path.
type workerStats struct {
	ok, errs  int
	hits      int
	codes     map[int]int
	firstErr  string
	latencies []time.Duration
}

func (s *workerStats) fail(err string) {
	s.errs++
	if s.firstErr == "" {
		s.firstErr = err
	}
}

// run executes a and returns what it measured. In open-loop mode the
// latency of a request counts from when it was due, not from when a worker
// got to it, so queueing in the generator is not hidden (coordinated
// omission).
func (a attack) run(ctx context.Context) *outcome {
	ctx, cancel := context.WithTimeout(ctx, a.duration)
	defer cancel()
	var ticks chan time.Time
	dropped := 0
	pacerDone := make(chan struct{})
	if a.rate > 0 {
		ticks = make(chan time.Time, a.workers)
		go func() {
			defer close(pacerDone)
			defer close(ticks)
			interval := time.Second / time.Duration(a.rate)
			begin := time.Now()
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			for n := 0; ; n++ {
				due := begin.Add(time.Duration(n) * interval)
				if d := time.Until(due); d > 0 {
					timer.Reset(d)
					select {
					case <-timer.C:
					case <-ctx.Done():
						return
					}
				} else if ctx.Err() != nil {
					return
				}
				select {
				case ticks <- due:
				default:
					dropped++
				}
			}
		}()
	} else {
		close(pacerDone)
	}

	begin := time.Now()
	stats := make([]*workerStats, a.workers)
	var wg sync.WaitGroup
	for i := range a.workers {
		st := &workerStats{codes: map[int]int{}}
		stats[i] = st
		wg.Go(func() {
			w := worker{addr: a.addr, rng: rand.New(rand.NewPCG(uint64(i)+1, uint64(time.Now().UnixNano()))), st: st, ok: a.ok}
			defer w.close()
			tg := a.next(w.rng)
			for {
				var due time.Time
				if ticks != nil {
					t, more := <-ticks
					if !more {
						return
					}
					due = t
				} else if ctx.Err() != nil {
					return
				}
				w.do(ctx, tg(w.rng), due)
			}
		})
	}
	wg.Wait()
	<-pacerDone
	o := &outcome{Elapsed: time.Since(begin), Codes: map[int]int{}, Dropped: dropped}
	for _, st := range stats {
		o.OK += st.ok
		o.Errors += st.errs
		o.Hits += st.hits
		for c, n := range st.codes {
			o.Codes[c] += n
		}
		if o.FirstErr == "" {
			o.FirstErr = st.firstErr
		}
		o.Latencies = append(o.Latencies, st.latencies...)
	}
	slices.Sort(o.Latencies)
	return o
}

type worker struct {
	addr string
	rng  *rand.Rand
	st   *workerStats
	ok   func(int) bool
	conn net.Conn
	br   *bufio.Reader
	buf  []byte
}

func (w *worker) close() {
	if w.conn != nil {
		w.conn.Close()
		w.conn = nil
	}
}

func (w *worker) dial(ctx context.Context) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", w.addr)
	if err != nil {
		return err
	}
	w.conn = c
	if w.br == nil {
		w.br = bufio.NewReaderSize(c, 16<<10)
	} else {
		w.br.Reset(c)
	}
	return nil
}

// do sends one request and reads its answer. due is zero in closed loop.
func (w *worker) do(ctx context.Context, t target, due time.Time) {
	start := time.Now()
	if due.IsZero() {
		due = start
	}
	if w.conn == nil {
		if err := w.dial(ctx); err != nil {
			if ctx.Err() == nil {
				w.st.fail("dial: " + err.Error())
				time.Sleep(10 * time.Millisecond) // don't spin on a dead server
			}
			return
		}
	}
	w.buf = appendRequest(w.buf[:0], t, w.addr)
	// A deadline bounds a hung server; the run's end does not cut a
	// request short, so the last ones are measured whole.
	w.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := w.conn.Write(w.buf); err != nil {
		w.st.fail("write: " + err.Error())
		w.close()
		return
	}
	resp, err := http.ReadResponse(w.br, nil)
	if err != nil {
		w.st.fail("read: " + err.Error())
		w.close()
		return
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		w.st.fail("body: " + err.Error())
		w.close()
		return
	}
	w.st.latencies = append(w.st.latencies, time.Since(due))
	w.st.codes[resp.StatusCode]++
	if cs := resp.Header["Cache-Status"]; len(cs) > 0 && strings.Contains(cs[0], "; hit") {
		w.st.hits++
	}
	if w.ok(resp.StatusCode) {
		w.st.ok++
	} else {
		w.st.fail(fmt.Sprintf("status %d on %s %s", resp.StatusCode, t.method, t.path))
	}
	if resp.Close {
		w.close()
	}
}

func appendRequest(b []byte, t target, host string) []byte {
	b = append(b, t.method...)
	b = append(b, ' ')
	b = append(b, t.path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nUser-Agent: sidecache-bench\r\n"...)
	if t.body != nil {
		b = append(b, "Content-Type: application/json\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(t.body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, t.body...)
}

// codesString renders status counts as "200:1234 404:5", sorted by code.
func codesString(m map[int]int) string {
	codes := make([]int, 0, len(m))
	for c := range m {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var b []byte
	for i, c := range codes {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, int64(c), 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(m[c]), 10)
	}
	return string(b)
}
