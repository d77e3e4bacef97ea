package invariant

import (
	"fmt"
	"strings"

	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// The bulk-null row (PCG stream 72): an upstream batching with
// DataLoader, or a GraphQL batch resolver, answers GET /u?ids=3,70,5
// with [{"id":3,…},null,{"id":5,…}], null in the place of an id it does
// not have (the batch function's contract: ids.map(id => rows.find(…) ||
// null)), and 404 to GET /u/70. Such a null is no element: the id it
// stands for is absent, as an id the answer leaves out is. Taken for a
// malformed answer, it failed the call, which was isolated id by id:
// the absent id answered 502 (and a list holding it 502), where the
// upstream called directly answers 404 (and lists the others).
//
// Two rounds in six the round's bulk answers write null for the absent
// ids (origin.Profile.NullAbsent), one in six they leave them out; in
// those three the round adds, on one replica so that they share its
// batches, one-id reads of absent ids (origin.AbsentID: 70-77, which no
// other row draws) and of good ones (1-8), and a split list of good ids
// and absent ones. An absent id's read must answer 404 (check's
// bulk-null), a good id's 200 (collateral), the list 200 with its good
// ids as asked (collateral, list-as-asked), within the round's budget.

// nullsMode is the row's draw for a round (drawResources): 0 none, 1
// null elements, 2 ids left out.
func (r *run) drawNullsMode() int {
	if !r.cfg.Mix.Has("bulk-null") {
		return 0
	}
	switch r.nulls.IntN(6) {
	case 0, 1:
		return 1
	case 2:
		return 2
	}
	return 0
}

// drawNulls is the row's requests for a round whose mode is r.nullsMode.
func (r *run) drawNulls() []*traffic.Request {
	if r.nullsMode == 0 {
		return nil
	}
	rng := r.nulls
	replica := rng.IntN(len(r.cfg.Replicas))
	read := func(id string) *traffic.Request {
		q := r.gen.CrowdRequest(rng)
		q.Crowd, q.Replica, q.Path = false, replica, "/u/"+id
		q.Res = origin.Resource(q.Path)
		return q
	}
	var reqs []*traffic.Request
	first := rng.IntN(64)
	for i := range 1 + rng.IntN(2) {
		reqs = append(reqs, read(origin.AbsentID(first+i)))
	}
	for range 1 + rng.IntN(2) {
		reqs = append(reqs, read(fmt.Sprint(1+rng.IntN(8))))
	}
	q := r.gen.CrowdRequest(rng)
	q.Crowd, q.Replica, q.Kind, q.Path = false, replica, "list", "/u"
	for range 2 + rng.IntN(4) {
		q.Ids = append(q.Ids, fmt.Sprint(1+rng.IntN(64)))
	}
	for i := range 1 + rng.IntN(2) {
		at := rng.IntN(len(q.Ids) + 1)
		q.Ids = append(q.Ids[:at], append([]string{origin.AbsentID(first + 2 + i)}, q.Ids[at:]...)...)
	}
	q.Ids = traffic.Distinct(q.Ids)
	q.Query = "ids=" + strings.Join(q.Ids, ",")
	q.Budget = traffic.BudgetList(len(q.Ids))
	return append(reqs, q)
}
