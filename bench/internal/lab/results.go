package lab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/sidecache/sidecache/bench/internal/load"
)

// Params is one bench run as the flags set it. The report prints it too.
type Params struct {
	Duration   time.Duration
	Warmup     time.Duration
	Workers    int
	Keys       int
	Dist       string
	Bulk       int
	Configs    []string
	Rows       []load.Workload
	Peers      []string
	Steps      []int
	StepTime   time.Duration
	StepConfig []string
	Quick      bool
	PeerRounds int

	Sidecache  string
	Demo       string
	Slots      int
	QueryTime  time.Duration
	PerRowTime time.Duration
	Records    int // clients = users in the demo
	Users      int // users in the demo, if more than Records (the CPU table's cold ids)
	// DemoFramework runs the demo as a framework's defaults would answer
	// (demo-upstream -framework: Vary: Accept-Encoding, gzip over 1 KiB,
	// weak ETags, lenient routes and IDs).
	DemoFramework bool
}

// needsSidecar reports whether the run needs bin/sidecache.
func (p Params) needsSidecar() bool {
	for _, c := range p.Configs {
		if c != "direct" {
			return true
		}
	}
	return slices.Contains(p.Peers, "sidecache")
}

func (p Params) needsRedis() bool {
	return slices.Contains(p.Configs, "cache") || slices.Contains(p.Configs, "cache+batch")
}

// Preflight fails before anything starts, naming what is missing.
func Preflight(p Params) error {
	var errs []error
	if _, err := os.Stat(p.Demo); err != nil {
		errs = append(errs, fmt.Errorf("%s not found: build it with `go build -o %s ./cmd/demo-upstream` (or `make build`)", p.Demo, p.Demo))
	}
	if p.needsSidecar() {
		if _, err := os.Stat(p.Sidecache); err != nil {
			errs = append(errs, fmt.Errorf("%s not found: build it with `go build -o %s ./cmd/sidecache` (or `make build`); "+
				"to measure without the sidecar: -configs direct -peers nginx,varnish,bare -step-configs direct", p.Sidecache, p.Sidecache))
		}
	}
	if p.needsRedis() {
		if _, err := exec.LookPath("redis-server"); err != nil {
			errs = append(errs, errors.New("redis-server not on PATH: the cache configurations need it for L2 (apt-get install redis-server)"))
		}
	}
	return errors.Join(errs...)
}

// Results is everything a run measured, in the order it was measured.
type Results struct {
	Rows   []RowResult
	Failed map[string]string // configuration → error that stopped it
	Peers  []PeerResult
	Steps  []StepResult
	Notes  []string
}

// RowResult is one row of one configuration's table.
type RowResult struct {
	Config      string
	Workload    load.Workload
	Out         *load.Outcome
	Upstream    int64
	UpstreamPer map[string]int64
}

// UpstreamRate is upstream calls per second of the measured run.
func (r RowResult) UpstreamRate() float64 {
	if r.Out == nil || r.Out.Elapsed <= 0 {
		return 0
	}
	return float64(r.Upstream) / r.Out.Elapsed.Seconds()
}

// PeerResult is one line of a peers table.
type PeerResult struct {
	Test     string // "pass" or "hit"
	Server   string
	Out      *load.Outcome // nil when not measured
	Upstream int64
	Missing  string // why not measured
	Rounds   int    // measurements taken; Out is the median one
}

// StepResult is one offered rate of the saturation table.
type StepResult struct {
	Config   string
	Offered  int
	Out      *load.Outcome
	Upstream int64
}
