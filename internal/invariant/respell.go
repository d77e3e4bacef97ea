package invariant

import (
	"context"
	"net/http"

	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// readTagged reads q.Tagged, a path of route r-summary tagged r:{id} as
// q's write's resource is, through q's replica, without credentials or
// keyed headers (so it may be stored and served from the store): once
// before the write, so a copy is there, and once after its answer, so a
// copy the write left is read back and held to own-write. Only the write
// route's invalidate tags reach that copy (its URI is another), on every
// answer after which the write may have been applied: a 2xx, and the
// 303, 502 and 504 of write-applied-other; and the write's spelling must
// reach them however it names the id (write-lenient-id). Before, a write
// spelled /r/%205 or /r/5-acme invalidated nothing, and one answered 303,
// 502 or 504 dropped the URI but not r:{id}.
func (r *run) readTagged(ctx context.Context, q *traffic.Request, base, what, count string) {
	if q.Tagged == "" || q.Hangup {
		return
	}
	rq := &traffic.Request{
		Who: q.Who, Replica: q.Replica, Method: http.MethodGet, Kind: "read", Route: "r",
		Path: q.Tagged, Res: origin.Resource(q.Tagged), Budget: traffic.BudgetRead, Hdr: http.Header{},
		Sent: map[string]string{"addr": q.Who.Addr, "cookie": "", "auth": "", "tenant": "", "lang": ""},
	}
	r.readBack(ctx, rq, base, what, count)
}
