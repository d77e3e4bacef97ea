// Package load drives one measured run against a server under test with
// vegeta's library: the rows (workloads) of the bench, the key
// distributions and targeters that feed them, and what a run measured.
package load

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// The load comes from vegeta's library (github.com/tsenart/vegeta/v12/lib,
// pinned in go.mod), so every cell can be rerun with `go tool vegeta attack`
// and the same options. Only the targets are ours: a Targeter that draws
// keys, builds bulk ID lists and PATCH bodies as the row asks.

// Request is one request a workload wants sent; the targeter turns it into
// a vegeta.Target against the server under test.
type Request struct {
	Method, Path string
	Body         []byte
}

// KeyDist draws keys 1..n. It is called by every vegeta worker at once,
// so it must be safe for concurrent use.
type KeyDist func() int

// runtimeSource is the runtime's per-thread generator as a rand.Source:
// safe for concurrent use without a lock, which the shared targeter needs.
type runtimeSource struct{}

func (runtimeSource) Uint64() uint64 { return rand.Uint64() }

// NewKeyDist is the distribution the -dist flag names over keys 1..n.
func NewKeyDist(name string, n int) (KeyDist, error) {
	switch name {
	case "uniform":
		return func() int { return 1 + rand.IntN(n) }, nil
	case "zipf":
		// s=1.1, a common web-cache skew: key 1 is the hottest. Zipf
		// only reads its own fields after construction, and its source
		// is lock-free, so one value serves every worker.
		z := rand.NewZipf(rand.New(runtimeSource{}), 1.1, 1, uint64(n-1))
		return func() int { return 1 + int(z.Uint64()) }, nil
	}
	return nil, fmt.Errorf("unknown -dist %q (uniform or zipf)", name)
}

// newTargeter is the vegeta.Targeter of one run: next's request against
// base ("http://host:port"). It never fails, so the attack runs for its
// whole duration.
func newTargeter(base string, next func() Request) vegeta.Targeter {
	jsonType := http.Header{"Content-Type": {"application/json"}} // read-only: Target.Request copies it
	return func(t *vegeta.Target) error {
		r := next()
		t.Method, t.URL, t.Body = r.Method, base+r.Path, r.Body
		if r.Body != nil {
			t.Header = jsonType
		}
		return nil
	}
}

// Attack describes one run.
type Attack struct {
	Base     string // "http://host:port"
	Workers  int
	Duration time.Duration
	Rate     int // 0: closed loop, each worker sends as soon as it is answered; >0: open loop at rate req/s
	Next     func() Request
	OK       func(code int) bool
}

// Outcome is what one attack measured: vegeta's Metrics over every
// result, plus what vegeta does not know — which statuses the row counts
// as success (DELETE's 404), Cache-Status hits, requests never sent.
type Outcome struct {
	vegeta.Metrics
	OK       int           // results with a status the row accepts
	Errors   int           // transport errors and other statuses
	Hits     int           // responses whose Cache-Status (RFC 9211) says hit
	FirstErr string        // the first error, for the report's details
	Dropped  int           // open loop: requests due in the run that were never sent
	Elapsed  time.Duration // first request to last answer (vegeta's Duration + Wait)
}

// TPS is accepted responses per second over the span vegeta divides its
// Throughput by. It equals Throughput for rows that accept only 2xx/3xx.
func (o *Outcome) TPS() float64 {
	if o.Elapsed <= 0 {
		return 0
	}
	return float64(o.OK) / o.Elapsed.Seconds()
}

// Run executes a with a fresh vegeta attacker and returns what it
// measured. The attacker has exactly a.Workers workers (Workers =
// MaxWorkers), each holding one keep-alive connection; rate 0 is vegeta's
// unbounded pacer, so the run is a closed loop whose throughput is set by
// the server. With a rate, vegeta's constant pacer issues the k-th request
// at k/rate; a result's latency then counts from that due time, not from
// when a free worker sent it, so queueing in the generator shows instead
// of being omitted (coordinated omission).
func (a Attack) Run(ctx context.Context) *Outcome {
	// Our own transport, so its idle connections can be closed when the
	// run ends; vegeta's options below configure it as they would their own.
	tr := &http.Transport{
		DialContext:     (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
		IdleConnTimeout: time.Minute,
	}
	defer tr.CloseIdleConnections()
	n := uint64(a.Workers)
	atk := vegeta.NewAttacker(
		vegeta.Client(&http.Client{Transport: tr}),
		vegeta.Workers(n),
		vegeta.MaxWorkers(n),
		vegeta.KeepAlive(true),
		vegeta.Connections(a.Workers),
		vegeta.Timeout(30*time.Second),
		vegeta.MaxBody(0), // read and discard bodies; keep none
	)
	pacer := vegeta.ConstantPacer{} // zero value: no limit
	var interval time.Duration
	if a.Rate > 0 {
		pacer = vegeta.ConstantPacer{Freq: a.Rate, Per: time.Second}
		interval = time.Second / time.Duration(a.Rate)
	}
	stop := context.AfterFunc(ctx, func() { atk.Stop() })
	defer stop()

	o := &Outcome{}
	begin := time.Now() // at most microseconds before vegeta's own start
	for r := range atk.Attack(newTargeter(a.Base, a.Next), pacer, a.Duration, "") {
		if interval > 0 {
			due := begin.Add(time.Duration(r.Seq+1) * interval)
			if end := r.End(); due.Before(r.Timestamp) {
				r.Timestamp, r.Latency = due, end.Sub(due)
			}
		}
		o.add(r, a.OK)
	}
	o.Metrics.Close()
	o.Elapsed = o.Duration + o.Wait
	if o.Elapsed <= 0 { // fewer than two results: rates over the wall clock, never a division by zero
		o.Elapsed = time.Since(begin)
	}
	if a.Rate > 0 {
		o.Dropped = max(0, int(a.Duration/interval)-int(o.Requests))
	}
	return o
}

// add counts one result into o, by the row's idea of success.
func (o *Outcome) add(r *vegeta.Result, ok func(int) bool) {
	o.Metrics.Add(r)
	code := int(r.Code)
	if code != 0 && ok(code) {
		o.OK++
	} else {
		o.Errors++
		if o.FirstErr == "" {
			o.FirstErr = r.Error
			if code != 0 {
				o.FirstErr = fmt.Sprintf("status %d on %s %s", code, r.Method, r.URL)
			}
		}
	}
	if servedFromCache(r.Headers) {
		o.Hits++
	}
}

// servedFromCache reads each server's own word for a cache hit, so the
// peers' rows show their hit share as sidecache's do: Cache-Status
// (RFC 9211 §2.1: "; hit") from sidecache and the bench's bare servers,
// NGINX's $upstream_cache_status as the bench's config adds it
// (X-Cache-Status: HIT), and Varnish's built-in VCL, whose X-Varnish
// carries the request's XID and, on a hit only, the stored object's.
func servedFromCache(h http.Header) bool {
	if cs := h["Cache-Status"]; len(cs) > 0 {
		return strings.Contains(cs[0], "; hit")
	}
	if xc := h["X-Cache-Status"]; len(xc) > 0 {
		return xc[0] == "HIT"
	}
	if xv := h["X-Varnish"]; len(xv) > 0 {
		return len(strings.Fields(xv[0])) == 2
	}
	return false
}
