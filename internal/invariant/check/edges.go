package check

import (
	"net/http"

	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// Edges counts the answered requests that carried an edge input, so
// a run's report shows these inputs reached the replicas.
func (ch *Checker) Edges(q *traffic.Request, resp *http.Response) {
	var k string
	switch {
	case q.Absolute:
		k = "absolute-form"
	case q.Chunked:
		k = "chunked-write"
	case q.Expect:
		k = "expect"
	case q.Hdr.Get("Expect") != "":
		k = "expect-read"
	case q.Hdr.Get("Range") != "":
		k = "range"
	case q.Hdr.Get(origin.ClientHop) != "":
		k = "connection-hop"
	case origin.Underscored(q.Hdr) != "" || origin.ForgedAddress(q.Hdr) != "":
		k = "underscore-forwarding"
	case q.Hdr.Get("Connection") != "":
		k = "connection-keyed-" + q.Route
	default:
		return
	}
	ch.mu.Lock()
	ch.checked[k+"-"+resp.Status[:3]]++
	ch.mu.Unlock()
}
