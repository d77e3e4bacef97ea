package traffic

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
)

// ListWrite is a write to a list endpoint naming ids 1-8, two to five
// draws of them (write-list), drawn from rng, the runner's own sequence
// for this row (stream 50), so it moves no draw of the others: PATCH
// /u?ids=… (route u's split list and bulk path) or /e?ids=… (route e's
// bulk path alone, beside its per-ID write route e-write). The ids are
// spelled as list endpoints read them: commas, the parameter repeated,
// ids[] (Rails, PHP), a blank before an id (%20). The origin applies it
// to each id (origin.Origin's writeList) and answers one stamp per id,
// which holds every later read of each id, alone or in a split list, to
// that version (check's ackList).
func (g *Gen) ListWrite(rng *rand.Rand) *Request {
	who := g.ids[rng.IntN(len(g.ids))]
	q := &Request{
		Who: who, Replica: rng.IntN(g.replicas), Method: http.MethodPatch, Hdr: http.Header{},
		Sent: map[string]string{"addr": who.Addr, "cookie": "", "auth": "", "tenant": "", "lang": ""},
		Kind: "write", Route: "u", Path: "/u", Budget: BudgetWrite,
	}
	if rng.IntN(3) == 0 {
		q.Route, q.Path = "e", "/e"
	}
	for range 2 + rng.IntN(4) {
		q.Ids = append(q.Ids, fmt.Sprint(1+rng.IntN(8)))
	}
	q.Ids = Distinct(q.Ids)
	switch rng.IntN(4) {
	case 0:
		q.Query = "ids=" + strings.Join(q.Ids, ",")
	case 1:
		q.Query = "ids=" + strings.Join(q.Ids, "&ids=")
	case 2:
		q.Query = "ids%5B%5D=" + strings.Join(q.Ids, "&ids%5B%5D=")
	default:
		q.Query = "ids=" + strings.Join(q.Ids, ",%20")
	}
	return q
}
