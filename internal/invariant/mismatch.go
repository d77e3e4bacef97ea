package invariant

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/origin"
)

// The mismatch-vary row. After about one round in four (stream 59), at
// most mismatchStages times a run, one replica is read twice on a
// resource of its own (origin.MismatchPath) with the field its answers
// will vary on (origin.MismatchField) set:
//
//  1. the first read fills the entry (200, ETag "a", stale at once);
//  2. the second revalidates it: the origin's 304 names ETag "b", so the
//     sidecar fetches again unconditionally, and that answer varies on
//     the field the read carried and the fetch did not — a third call
//     would be wished for.
//
// Each read's calls, attributed by the resource (no other request asks
// for it), must stay within check.ReadBudget (budget-request): the
// round's budget would hide one extra call. The second read must answer
// the value it sent (MismatchSeen), the stored "first" (stale_if_error
// over a failed refetch), or a 502/504 — never another variant's body.
//
// Counts mismatch-vary-stages, mismatch-vary-revalidated (the second read
// began with the conditional call, as the row means), and
// mismatch-vary-<status>.

// mismatchStages bounds the row's stages a run: each makes route n learn
// a field of its own, and a route learns at most 32.
const mismatchStages = 2

func (r *run) mismatchVary(ctx context.Context, round int) {
	if !r.cfg.Mix.Has("mismatch-vary") || r.mismatchRng.IntN(100) >= 25 || r.mismatchDone >= mismatchStages {
		return
	}
	rng := r.mismatchRng
	r.mismatchDone++
	r.chk.Count("mismatch-vary-stages", 1)
	n := int(r.cfg.Seed%100_000)*1000 + round%1000
	path, field := origin.MismatchPath(n), origin.MismatchField(n)
	k := rng.IntN(len(r.cfg.Replicas))
	val := strconv.Itoa(1 + rng.IntN(9))
	cl := &http.Client{Timeout: 30 * time.Second}
	defer cl.CloseIdleConnections()
	get := func(what string) (int, http.Header, string, bool) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.cfg.Replicas[k]+path, nil)
		if err != nil {
			r.violate("harness", "mismatch-vary: %v", err)
			return 0, nil, "", false
		}
		req.Host = r.cfg.Host
		req.Header.Set(field, val)
		resp, err := cl.Do(req)
		if err != nil {
			r.violate("transport", "mismatch-vary: replica %d: GET %s (%s): %v", k, path, what, err)
			return 0, nil, "", false
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			r.violate("garbled", "mismatch-vary: replica %d: GET %s (%s): %v", k, path, what, err)
			return 0, nil, "", false
		}
		// Every call of the read was made before its answer (route n
		// revalidates in the foreground: no stale_while_revalidate).
		calls := r.cfg.Origin.TakeMismatchCalls(path)
		if len(calls) > 0 && strings.HasPrefix(calls[0], `If-None-Match "\"a\""`) {
			r.chk.Count("mismatch-vary-revalidated", 1)
		}
		r.chk.RequestCalls(fmt.Sprintf("mismatch-vary: replica %d: GET %s with %s: %s (%d)", k, path, field, what, resp.StatusCode), calls, check.ReadBudget)
		return resp.StatusCode, resp.Header, string(b), true
	}
	if st, _, _, ok := get("fill"); !ok || st != http.StatusOK {
		return
	}
	st, h, body, ok := get("revalidation")
	if !ok {
		return
	}
	r.chk.Count("mismatch-vary-"+strconv.Itoa(st), 1)
	switch {
	case st == http.StatusBadGateway || st == http.StatusGatewayTimeout:
	case st == http.StatusOK && body == "first":
		r.chk.Count("mismatch-vary-stale", 1)
	case st == http.StatusOK && body == "seen="+val && h.Get(origin.MismatchSeen) == val:
	default:
		r.violate("identity", "mismatch-vary: replica %d: GET %s with %s: %s: answered %d %q (%s %q), not its own variant", k, path, field, val, st, body, origin.MismatchSeen, h.Get(origin.MismatchSeen))
	}
}
