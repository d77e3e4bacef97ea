package invariant

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"

	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// The list-refused row (PCG stream 64): once a seed, between rounds, one
// split list of route u, alone on the replicas: one fresh good id among
// 39 ids the origin's bulk endpoint refuses with 400 (origin.RefusedID),
// at a drawn place. The list costs at most its budget (13 bulk calls at
// max_size 32), and isolation halving its ids gets nowhere near one id
// alone in that many: every call is refused, each the upstream's answer
// to a part of this list's own ids, asked with its headers.
//
// Checked (list-refused): the list is answered as the origin answers it
// called directly, 400 with its "bad id" body (an id the app refuses
// refuses any list holding it: docs/configuration.md, routes[].split),
// and within traffic.BudgetList of bulk calls, resends apart. The ids
// left when the budget ran out failed with 502, so the list answered 502:
// a failure of the upstream it never had. Counted: list-refused (played).

// refusedBase is the row's good id's base (one a seed, below the
// batch-opener-budget row's ids).
const refusedBase = 46000

// refusedRow is the row's state in a run.
type refusedRow struct {
	rng *rand.Rand
	at  int // the round after which it plays (-1: never)
}

// drawRefusedRound draws the round after which the row plays, from stream
// 64 alone, so the other rows' draws are unchanged.
func (r *run) drawRefusedRound() {
	r.refused.rng, r.refused.at = rand.New(rand.NewPCG(r.cfg.Seed, 64)), -1
	if r.cfg.Mix.Has("list-refused") && r.cfg.Rounds >= 2 {
		r.refused.at = r.refused.rng.IntN(r.cfg.Rounds)
	}
}

// listRefused plays the row after round (see above).
func (r *run) listRefused(ctx context.Context, round int) {
	if round != r.refused.at {
		return
	}
	// Plain elements, whatever the last round drew for the bulk endpoint;
	// the next round draws its own.
	r.cfg.Origin.SetProfile(origin.BulkProfile, origin.Profile{})
	ids := make([]string, 0, 40)
	for len(ids) < 39 {
		if id := origin.RefusedID(r.refused.rng.Uint64()); !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	ids = slices.Insert(ids, r.refused.rng.IntN(len(ids)+1), fmt.Sprint(refusedBase+int(r.cfg.Seed%1000)))
	path := "/u?ids=" + strings.Join(ids, ",")
	want, wantBody, err := r.refusedGet(ctx, r.cfg.Origin.URL, path)
	if err != nil {
		r.violate("harness", "GET %s from the origin: %v", path, err)
		return
	}
	o := r.cfg.Origin
	before, resent := o.Calls.Load(), o.Resends.Load()
	replica := r.cfg.Replicas[r.refused.rng.IntN(len(r.cfg.Replicas))]
	code, body, err := r.refusedGet(ctx, replica, path)
	calls := o.Calls.Load() - before - (o.Resends.Load() - resent)
	r.chk.Count("list-refused", 1)
	switch {
	case err != nil:
		r.violate("list-refused", "GET /u?ids= of 1 good and 39 refused ids: %v", err)
	case code != want || !strings.HasPrefix(body, "bad id 7"):
		r.violate("list-refused", "GET /u?ids= of 1 good and 39 refused ids: %d %.60q, want the origin's own answer to the list, %d %.60q", code, body, want, wantBody)
	}
	if b := traffic.BudgetList(len(ids)); calls > int64(b) {
		r.violate("budget", "GET /u?ids= of 1 good and 39 refused ids cost %d upstream calls, want at most %d", calls, b)
	}
}

// refusedGet is one plain GET of path from base (Host the replicas'
// own): its status and body.
func (r *run) refusedGet(ctx context.Context, base, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = r.cfg.Host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b), err
}
