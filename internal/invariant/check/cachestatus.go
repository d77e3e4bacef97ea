package check

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// member is the sidecar's member of an answer's Cache-Status (RFC 9211
// §2), its parameters as written.
type member struct {
	hit            bool
	fwd, fwdStatus string
	ttl, detail    string
	hasTTL         bool
	raw            string
}

// sidecacheMember finds the member named sidecache in the Cache-Status
// field lines vs (the last one: the field lists the caches from the origin
// outward, §2), and reports whether there was one.
func sidecacheMember(vs []string) (member, bool) {
	var m member
	found := false
	for _, v := range vs {
		for _, part := range strings.Split(v, ",") {
			part = strings.TrimSpace(part)
			name, params, _ := strings.Cut(part, ";")
			if strings.TrimSpace(name) != "sidecache" {
				continue
			}
			m, found = member{raw: part}, true
			for p := range strings.SplitSeq(params, ";") {
				k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
				switch k {
				case "hit":
					m.hit = true
				case "fwd":
					m.fwd = val
				case "fwd-status":
					m.fwdStatus = val
				case "ttl":
					m.ttl, m.hasTTL = val, true
				case "detail":
					m.detail = val
				}
			}
		}
	}
	return m, found
}

// routeTTL is the ttl of the harness's routes whose freshness the route
// sets (env_test.go: ttl 5m on every one), in seconds.
const routeTTL = 300

// routeMode names the routes whose stored answers are fresh for routeTTL
// (freshness: route, the default); n and s take the origin's freshness.
var routeMode = map[string]bool{"r": true, "p": true, "t": true, "k": true, "h": true, "u": true, "e": true, "q": true, "a": true}

// checkCacheStatus holds the answer's Cache-Status ttl (RFC 9211 §2.4: the
// freshness left, negative once stale) to what the answer is:
//
//   - ttl is an integer, on a hit or a stored copy served only (a
//     response that came from the upstream has no stored freshness to
//     report);
//   - an answer served stale (fwd=stale without fwd-status=304: the held
//     copy itself, stale-if-error or stale-while-revalidate) has ttl < 0;
//     a copy served on an upstream failure that is not fwd=stale (it was
//     still fresh: internal/proxy respondHeld) has ttl ≥ 0;
//   - a hit has ttl ≥ 0;
//   - where the harness knows the freshness lifetime (routeTTL on the
//     route-mode routes; max-age=N on the answer of n and s), ttl + Age
//     is that lifetime within a second of rounding, and a copy whose Age
//     has reached it is never a hit.
func (ch *Checker) checkCacheStatus(q *traffic.Request, resp *http.Response) {
	m, ok := sidecacheMember(resp.Header.Values("Cache-Status"))
	if !ok {
		return
	}
	// held: a stored copy served as the upstream failed, fresh or stale.
	held := m.detail == "stale-if-error"
	var ttl int
	if m.hasTTL {
		n, err := strconv.Atoi(m.ttl)
		if err != nil {
			ch.Violate("cache-status", "%s: ttl %q is not an integer (%s)", q, m.ttl, m.raw)
			return
		}
		ttl = n
		if !m.hit && m.fwd != "stale" && !held {
			ch.Violate("cache-status", "%s: ttl on an answer neither a hit nor a stored copy (%s)", q, m.raw)
		}
	}
	served := m.fwd == "stale" && m.fwdStatus != "304"
	switch {
	case held && m.fwd != "stale" && (!m.hasTTL || ttl < 0):
		ch.Violate("cache-status", "%s: a copy served after a failure not as fwd=stale, ttl %q: only a fresh one may (%s)", q, m.ttl, m.raw)
	case served && !m.hasTTL:
		ch.Violate("cache-status", "%s: a stale answer without ttl (%s)", q, m.raw)
	case served && ttl >= 0:
		ch.Violate("cache-status", "%s: a stale answer with ttl=%d, want < 0 (RFC 9211 §2.4) (%s)", q, ttl, m.raw)
	case m.hit && m.hasTTL && ttl < 0:
		ch.Violate("cache-status", "%s: a hit with ttl=%d: a hit is fresh (%s)", q, ttl, m.raw)
	}
	if served {
		ch.Count("cache-status-stale", 1)
	} else if m.hit && m.hasTTL {
		ch.Count("cache-status-hit", 1)
	}
	life, known := freshness(q, resp)
	age, err := strconv.Atoi(resp.Header.Get("Age"))
	if !known || err != nil || !m.hasTTL || !m.hit && !served && !held {
		return
	}
	ch.Count("cache-status-lifetime", 1)
	if d := ttl + age - life; d < -1 || d > 1 {
		ch.Violate("cache-status", "%s: ttl=%d with Age %d, but its freshness lifetime is %ds (%s)", q, ttl, age, life, m.raw)
	}
	if m.hit && age >= life {
		ch.Violate("cache-status", "%s: a hit with Age %d, its freshness lifetime %ds: stale (%s)", q, age, life, m.raw)
	}
}

// freshness is the freshness lifetime, in seconds, of the stored answer
// resp came from, when the harness knows it.
func freshness(q *traffic.Request, resp *http.Response) (int, bool) {
	if q.Kind == "write" || q.Kind == "list" {
		return 0, false
	}
	if routeMode[q.Route] {
		return routeTTL, true
	}
	if q.Route != "n" && q.Route != "s" {
		return 0, false
	}
	for _, v := range resp.Header.Values("Cache-Control") {
		for d := range strings.SplitSeq(v, ",") {
			if s, ok := strings.CutPrefix(strings.TrimSpace(d), "max-age="); ok {
				n, err := strconv.Atoi(s)
				return n, err == nil
			}
		}
	}
	return 0, false
}
