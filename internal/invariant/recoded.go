package invariant

import (
	"context"
	"net/http"

	"github.com/sidecache/sidecache/internal/invariant/origin"
)

// readRecoded sends, after the round, the 304-coding row's reads of each
// /n resource whose profile this round answers its 304s with
// Content-Encoding: gzip (drawFields): through one replica, without
// credentials or keyed headers, one after the other, with no
// Accept-Encoding (a stale-at-once identity copy is stored, or
// revalidated), with gzip (a revalidation, which the origin answers 304
// saying gzip), and with none again. The round's own reads of a route-n
// variant seldom repeat before its version moves, so without these no
// revalidation of route n reached the origin at all. A 304 that
// relabelled the stored identity body gzip (RFC 9111 §3.2 keeps the stored
// body's fields) shows as garbled (the gzip read cannot decode it) or as
// coding (the identity read gets gzip).
func (r *run) readRecoded(ctx context.Context) {
	ids := r.recoded
	r.recoded = nil
	for _, id := range ids {
		path := "/n/" + id
		for i, ae := range [...]string{"", "gzip", ""} {
			q := r.gen.Probe(i, http.MethodGet, path, origin.Resource(path), 0)
			q.Route = "n"
			if ae != "" {
				q.Hdr.Set("Accept-Encoding", ae)
			}
			r.readBack(ctx, q, r.cfg.Replicas[0], "304-coding read", "304-coding-")
		}
	}
}
