package report

import (
	"fmt"
	"strings"
	"time"
)

// goal is one of the performance targets with its verdict.
type goal struct {
	Goal     string
	Measured string
	Verdict  string // "met", "missed", "not measured"
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// evalTargets computes the performance targets' ratios from what was measured.
func (r *Report) evalTargets() []goal {
	direct, okD := r.rowTPS("direct", "clients-get")
	cached, okC := r.rowTPS("cache", "clients-get")
	directU, okDU := r.rowTPS("direct", "users-get")
	batched, okB := r.rowTPS("batch", "users-get")
	sidePass, okSP := r.peerTPS("pass", "sidecache (no routes)")
	nginxPass, okNP := r.peerTPS("pass", "nginx proxy_pass")
	sideHit, okSH := r.peerTPS("hit", "sidecache (L1 hit)")
	nginxHit, okNH := r.peerTPS("hit", "nginx proxy_cache")
	bareHit, okBH := r.peerTPS("hit", "bare Go (from memory)")

	p99 := goal{Goal: "`GET /clients/{id}` with cache: p99 ≤ 10 ms", Measured: "needs row cache", Verdict: "not measured"}
	if row, ok := r.row("cache", "clients-get"); ok {
		d := row.Out.Latencies.P99
		p99.Measured, p99.Verdict = fmtMS(d), verdict(d <= 10*time.Millisecond)
	}
	return []goal{
		tpsGoal("`GET /clients/{id}` with cache ≥ 20× direct TPS", cached, direct, 20,
			okD && okC && direct > 0, "needs rows direct and cache"),
		p99,
		tpsGoal("`GET /users/{id}` cold misses with batching ≥ 5× direct TPS (configuration batch: no cache, so every request misses)", batched, directU, 5,
			okDU && okB && directU > 0, "needs rows direct and batch"),
		tpsGoal("sidecar pass-through TPS ≥ NGINX pass-through TPS", sidePass, nginxPass, 1,
			okSP && okNP, missing(r, "pass", "sidecache (no routes)", "nginx proxy_pass")),
		tpsGoal("L1-hit TPS ≥ NGINX proxy_cache hit TPS", sideHit, nginxHit, 1,
			okSH && okNH, missing(r, "hit", "sidecache (L1 hit)", "nginx proxy_cache")),
		tpsGoal("L1-hit TPS ≥ 0.9× bare Go", sideHit, bareHit, 0.9,
			okSH && okBH, missing(r, "hit", "sidecache (L1 hit)", "bare Go (from memory)")),
	}
}

// tpsGoal is a target "a's TPS ≥ factor × b's TPS", or why it could not be
// measured.
func tpsGoal(text string, a, b, factor float64, measured bool, why string) goal {
	g := goal{Goal: text}
	if !measured {
		g.Measured, g.Verdict = why, "not measured"
		return g
	}
	g.Measured = fmt.Sprintf("%.2f× (%s vs %s TPS)", a/b, fmtTPS(a), fmtTPS(b))
	g.Verdict = verdict(a >= factor*b)
	return g
}

func (r *Report) rowTPS(config, workload string) (float64, bool) {
	row, ok := r.row(config, workload)
	if !ok {
		return 0, false
	}
	return row.Out.TPS(), true
}

func (r *Report) peerTPS(test, server string) (float64, bool) {
	p, ok := r.peer(test, server)
	if !ok {
		return 0, false
	}
	return p.Out.TPS(), true
}

// missing says which side of a peer comparison has no number, and why.
func missing(r *Report, test string, servers ...string) string {
	var parts []string
	for _, s := range servers {
		if _, ok := r.peer(test, s); ok {
			continue
		}
		why := "not run"
		for _, p := range r.Peers {
			if p.Test == test && p.Server == s {
				why = p.Missing
			}
		}
		parts = append(parts, s+": "+why)
	}
	return strings.Join(parts, "; ")
}

func (r *Report) targets(w func(string, ...any)) {
	w("## Performance targets")
	w("")
	w("| target | measured | verdict |")
	w("|---|---|---|")
	for _, t := range r.evalTargets() {
		v := t.Verdict
		if v != "not measured" {
			v = "**" + v + "**"
		}
		w("| %s | %s | %s |", t.Goal, t.Measured, v)
	}
	w("")
}
