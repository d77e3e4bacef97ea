package report

import (
	"fmt"
	"strings"
	"time"
)

// goal is one of issue 5's targets with its verdict.
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

// evalTargets computes issue 5's target ratios from what was measured.
func (r *Report) evalTargets() []goal {
	var ts []goal
	ratio := func(a, b float64) string { return fmt.Sprintf("%.2f×", a/b) }

	direct, okD := r.row("direct", "clients-get")
	cache, okC := r.row("cache", "clients-get")
	t := goal{Goal: "`GET /clients/{id}` with cache ≥ 20× direct TPS"}
	if okD && okC && direct.Out.TPS() > 0 {
		t.Measured = fmt.Sprintf("%s (%s vs %s TPS)", ratio(cache.Out.TPS(), direct.Out.TPS()), fmtTPS(cache.Out.TPS()), fmtTPS(direct.Out.TPS()))
		t.Verdict = verdict(cache.Out.TPS() >= 20*direct.Out.TPS())
	} else {
		t.Measured, t.Verdict = "needs rows direct and cache", "not measured"
	}
	ts = append(ts, t)

	t = goal{Goal: "`GET /clients/{id}` with cache: p99 ≤ 10 ms"}
	if okC {
		p99 := cache.Out.Latencies.P99
		t.Measured, t.Verdict = fmtMS(p99), verdict(p99 <= 10*time.Millisecond)
	} else {
		t.Measured, t.Verdict = "needs row cache", "not measured"
	}
	ts = append(ts, t)

	directU, okDU := r.row("direct", "users-get")
	batchU, okB := r.row("batch", "users-get")
	t = goal{Goal: "`GET /users/{id}` cold misses with batching ≥ 5× direct TPS (configuration batch: no cache, so every request misses)"}
	if okDU && okB && directU.Out.TPS() > 0 {
		t.Measured = fmt.Sprintf("%s (%s vs %s TPS)", ratio(batchU.Out.TPS(), directU.Out.TPS()), fmtTPS(batchU.Out.TPS()), fmtTPS(directU.Out.TPS()))
		t.Verdict = verdict(batchU.Out.TPS() >= 5*directU.Out.TPS())
	} else {
		t.Measured, t.Verdict = "needs rows direct and batch", "not measured"
	}
	ts = append(ts, t)

	sp, okSP := r.peer("pass", "sidecache (no routes)")
	np, okNP := r.peer("pass", "nginx proxy_pass")
	t = goal{Goal: "sidecar pass-through TPS ≥ NGINX pass-through TPS"}
	if okSP && okNP {
		t.Measured = fmt.Sprintf("%s (%s vs %s TPS)", ratio(sp.Out.TPS(), np.Out.TPS()), fmtTPS(sp.Out.TPS()), fmtTPS(np.Out.TPS()))
		t.Verdict = verdict(sp.Out.TPS() >= np.Out.TPS())
	} else {
		t.Measured, t.Verdict = missing(r, "pass", "sidecache (no routes)", "nginx proxy_pass"), "not measured"
	}
	ts = append(ts, t)

	sh, okSH := r.peer("hit", "sidecache (L1 hit)")
	nh, okNH := r.peer("hit", "nginx proxy_cache")
	t = goal{Goal: "L1-hit TPS ≥ NGINX proxy_cache hit TPS"}
	if okSH && okNH {
		t.Measured = fmt.Sprintf("%s (%s vs %s TPS)", ratio(sh.Out.TPS(), nh.Out.TPS()), fmtTPS(sh.Out.TPS()), fmtTPS(nh.Out.TPS()))
		t.Verdict = verdict(sh.Out.TPS() >= nh.Out.TPS())
	} else {
		t.Measured, t.Verdict = missing(r, "hit", "sidecache (L1 hit)", "nginx proxy_cache"), "not measured"
	}
	ts = append(ts, t)

	bh, okBH := r.peer("hit", "bare Go (from memory)")
	t = goal{Goal: "L1-hit TPS ≥ 0.9× bare Go"}
	if okSH && okBH {
		t.Measured = fmt.Sprintf("%s (%s vs %s TPS)", ratio(sh.Out.TPS(), bh.Out.TPS()), fmtTPS(sh.Out.TPS()), fmtTPS(bh.Out.TPS()))
		t.Verdict = verdict(sh.Out.TPS() >= 0.9*bh.Out.TPS())
	} else {
		t.Measured, t.Verdict = missing(r, "hit", "sidecache (L1 hit)", "bare Go (from memory)"), "not measured"
	}
	return append(ts, t)
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
	w("## Issue 5 targets")
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
