package invariant

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/sidecache/sidecache/internal/invariant/check"
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

// What a replica holds is read, not inferred: before a checked request
// the sender asks the replica's admin GET /cache (docs/admin-api.md) for
// each of its ids what it holds for a request without Accept-Language or
// X-Tenant (the primary key, or the variant it picks), and, when the
// request failed, asks again. An id is held throughout when one entry
// (tier, key, stored_at) that could answer stale (a 200, fresh or within
// stale_if_error) is in both answers: it was stored before the request
// and never left while it was answered, in L1 or L2, wherever it was
// fetched. The inspection reads each tier as a request does (L2's epochs
// included) but for the coherence bound, which the counters above cover.
// This check holds on every replica, whoever received the copies: the
// inference below (check.noteHeld, a client received the id) can only
// say where a copy must be, and under evict-epochs only on the replica
// that received it (a new tag's first fill is not kept in L2), so it
// missed a copy held through L2 or fetched by a read of another client.

// heldCopies is, per id, the entries replica i holds that could answer a
// request of route s without Accept-Language or X-Tenant stale; ok is
// false when an inspection failed.
func (r *run) heldCopies(ctx context.Context, i int, ids []string) (copies map[string][]string, ok bool) {
	copies = map[string][]string{}
	for _, id := range ids {
		if _, done := copies[id]; done {
			continue
		}
		got, err := inspect(ctx, r.cfg.Admins[i], r.cfg.AdminToken, "http://"+strings.ToLower(r.cfg.Host)+"/s/"+id)
		if err != nil {
			r.violate("harness", "replica %d: GET /cache: %v", i, err)
			return nil, false
		}
		copies[id] = got
	}
	return copies, true
}

// heldThroughout reports whether every id has an entry in both before
// and after.
func heldThroughout(before, after map[string][]string) bool {
	for id, b := range before {
		if !slices.ContainsFunc(after[id], func(e string) bool { return slices.Contains(b, e) }) {
			return false
		}
	}
	return len(before) > 0
}

// heldAll reports whether every id has an entry.
func heldAll(copies map[string][]string) bool {
	for _, c := range copies {
		if len(c) == 0 {
			return false
		}
	}
	return len(copies) > 0
}

// inspect asks admin's GET /cache for target (no request headers) and
// returns the entries that could answer stale, each as "tier key
// stored_at".
func inspect(ctx context.Context, admin, token, target string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/cache?url="+url.QueryEscape(target), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: status %s", target, resp.Status)
	}
	var in struct {
		Entries []struct {
			Tier, Key          string
			Status             int
			StoredAt           string   `json:"stored_at"`
			Fresh              bool     `json:"fresh"`
			WithinStaleIfError bool     `json:"within_stale_if_error"`
			Variants           []string `json:"variants"`
		} `json:"entries"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&in); err != nil {
		return nil, fmt.Errorf("%s: %w", target, err)
	}
	var out []string
	for _, e := range in.Entries {
		if e.Status == http.StatusOK && e.Variants == nil && (e.Fresh || e.WithinStaleIfError) {
			out = append(out, e.Tier+" "+e.Key+" "+e.StoredAt)
		}
	}
	return out, nil
}

// heldIDs are the ids of route s request q.
func heldIDs(q *traffic.Request) []string {
	if q.Kind == "list" {
		return q.Ids
	}
	return []string{strings.TrimPrefix(q.Res, "s/")}
}

// heldChecked reports whether q is a request route s's stale-if-error
// check applies to (check.checkHeld's own filter), so worth a /metrics
// read before it is sent.
func (r *run) heldChecked(q *traffic.Request) bool {
	return q.Route == "s" && !r.withheld && q.Sent["lang"] == "" && q.Sent["tenant"] == "" &&
		q.Replica < len(r.cfg.Admins) && !q.Trickle && !(q.Kind == "list" && check.PassesThrough(q.Ids))
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
	return readCounter(ctx, admin, func(line string) bool {
		return strings.HasPrefix(line, "sidecache_coherence_refused_total{") ||
			strings.HasPrefix(line, "sidecache_cache_lookups_total{") &&
				strings.Contains(line, `tier="l2"`) && strings.Contains(line, `result="error"`)
	})
}

// readCounter is the sum of the samples of admin's /metrics whose line
// match picks.
func readCounter(ctx context.Context, admin string, match func(line string) bool) (float64, error) {
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
		if !match(line) {
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
