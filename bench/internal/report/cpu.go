package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sidecache/sidecache/bench/internal/lab"
)

// CPUReport is the CPU-per-request table (bench -cpu).
type CPUReport struct {
	Params  lab.Params
	CPU     lab.CPUParams
	Started time.Time
	Machine Machine
	Command string
	Results []lab.CPUResult
}

// Write writes CPU-<stamp>.md and cpu-latest.md under dir.
func (r *CPUReport) Write(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	md := []byte(r.Markdown())
	var paths []string
	for _, name := range []string{"CPU-" + r.Started.UTC().Format("2006-01-02-1504") + ".md", "cpu-latest.md"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, md, 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// Markdown is the table: one line per path and server, the median round's
// CPU µs per request with the spread over rounds, and the ratios the
// goals are stated in.
func (r *CPUReport) Markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# CPU per request — %s", r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	w("")
	w("`%s`", r.Command)
	w("")
	w("Each server's own CPU time (utime + stime of its processes and their descendants, from `/proc/<pid>/stat`) "+
		"over %v at a fixed open-loop %d req/s (vegeta, %d connections), divided by the requests answered. "+
		"GET /clients/{id} over %d keys (bodies of the demo's client records, 600 B–1 KB). "+
		"Hit: every key cached first. Pass: a proxy without routes in front of the bare Go server. "+
		"Median of %d interleaved rounds, with the spread (min–max).",
		r.CPU.Time, r.CPU.Rate, r.CPU.Workers, r.Params.Keys, r.CPU.Rounds)
	w("")
	w("Machine: %s, %d CPUs, %s; %s; nginx %s; varnish %s.", r.Machine.CPU, r.Machine.NumCPU, r.Machine.Kernel,
		r.Machine.Go, orDash(r.Machine.Nginx), orDash(r.Machine.Varnish))
	w("")
	w("| path | server | CPU µs/request | spread | achieved req/s | errors |")
	w("|---|---|---:|---|---:|---:|")
	for _, c := range r.Results {
		if len(c.PerReq) == 0 {
			w("| %s | %s | — | not measured (%s) | | |", c.Test, c.Server, c.Missing)
			continue
		}
		w("| %s | %s | %.1f | %.1f–%.1f | %.0f | %d |", c.Test, c.Server, usf(c.Median()),
			usf(c.PerReq[0]), usf(c.PerReq[len(c.PerReq)-1]), c.TPS, c.Errors)
	}
	w("")
	find := func(test, prefix string) time.Duration {
		for _, c := range r.Results {
			if c.Test == test && strings.HasPrefix(c.Server, prefix) && len(c.PerReq) > 0 {
				return c.Median()
			}
		}
		return 0
	}
	ratio := func(a, b time.Duration) string {
		if a == 0 || b == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f×", float64(a)/float64(b))
	}
	var names []string // every sidecache row: "<name> (L1 hit)"
	for _, c := range r.Results {
		if n, ok := strings.CutSuffix(c.Server, " (L1 hit)"); ok && c.Test == "hit" {
			names = append(names, n)
		}
	}
	w("| sidecar | pass ÷ hit (goal ≤ 1.5×) | hit ÷ nginx hit (goal ≤ 1.3×) | pass ÷ nginx pass (goal ≤ 2×) |")
	w("|---|---:|---:|---:|")
	for _, n := range names {
		hit, pass := find("hit", n+" ("), find("pass", n+" (")
		w("| %s | %s | %s | %s |", n, ratio(pass, hit), ratio(hit, find("hit", "nginx")), ratio(pass, find("pass", "nginx")))
	}
	w("")
	w("Numbers from a machine running other work are noisy: read the spread, and the ratios within one run.")
	return b.String()
}

func usf(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
