package invariant

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// Route s's stale-if-error check (check/stale.go) holds that a copy a
// client received is served on every later failure. A replica may not
// read it for a while, as its contract says: while it cannot prove that
// it hears its peers' invalidations (its own heartbeats came back later
// than coherence.max_lag, on a loaded machine) it serves no entry older
// than max_lag, stale-if-error copies included (docs/admin-api.md,
// "coherence"; a purge acknowledged elsewhere may have dropped it), and
// while Redis fails it reads no L2 entry. Both are counted where they
// happen: sidecache_coherence_refused_total, and
// sidecache_cache_lookups_total{tier="l2",result="error"}. The sender
// reads their sum from the replica's /metrics before a checked request
// of route s and, when it failed, after it: a request whose replica
// refused or failed no read meanwhile could read every copy it held.

// heldChecked reports whether q is a request route s's stale-if-error
// check applies to (check.checkHeld's own filter), so worth a /metrics
// read before it is sent.
func (r *run) heldChecked(q *traffic.Request) bool {
	return q.Route == "s" && !r.withheld && q.Sent["lang"] == "" && q.Sent["tenant"] == "" &&
		q.Replica < len(r.cfg.Admins) && !q.Trickle
}

// unreadable is the sum of the counters above on replica i; ok is false
// when /metrics could not be read.
func (r *run) unreadable(ctx context.Context, i int) (n float64, ok bool) {
	n, err := readUnreadable(ctx, r.cfg.Admins[i])
	if err != nil {
		r.violate("harness", "replica %d: /metrics: %v", i, err)
		return 0, false
	}
	return n, true
}

// readUnreadable reads the reads refused by the coherence bound and the
// failed L2 lookups from the Prometheus exposition at admin's /metrics.
func readUnreadable(ctx context.Context, admin string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %s", resp.Status)
	}
	var n float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		refused := strings.HasPrefix(line, "sidecache_coherence_refused_total{")
		failed := strings.HasPrefix(line, "sidecache_cache_lookups_total{") &&
			strings.Contains(line, `tier="l2"`) && strings.Contains(line, `result="error"`)
		if !refused && !failed {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", line, err)
		}
		n += v
	}
	return n, sc.Err()
}
