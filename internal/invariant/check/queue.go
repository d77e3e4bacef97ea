package check

import (
	"net/http"
	"strconv"

	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// Dropped is one replica's sidecache_batch_dropped_total of one route, by
// reason.
type Dropped struct {
	QueueFull, Deadline, Abandoned int64
}

// Queue checks a queue round (the runner's queue.go) once every answer
// came, against the replicas' dropped counts read before and after it
// (indexed by replica):
//
//   - queue: every answer is a 200 (Answer checks its body as any
//     other's), a 503 with a Retry-After of whole seconds (RFC 9110
//     §10.2.3: the batcher refused it, its group's queue full) or a 504
//     (its batch not sent within max_wait + upstream.timeout); never a
//     502 nor any other status for ids the origin answers;
//   - queue-fair: on each replica, when one-id reads were sent, at least
//     one answered 200: lists may hold ¾ of the queue, the rest is the
//     one-id misses' own (internal/batch listShare);
//   - queue-metric: each replica's queue-full count grew by the ids of the
//     503s its clients saw (a list counts its every id: all are fresh and
//     named by it alone, so none was pending), its deadline count by
//     nothing unless a 504 was seen and by at most the ids of the 504s
//     (one call's ids fail together, whoever waits on them).
func (ch *Checker) Queue(reqs []*traffic.Request, before, after []Dropped) {
	type tally struct {
		reads, readsOK int
		refused, late  int64 // ids of the 503s, of the 504s
		n503, n504     int
	}
	per := make([]tally, len(before))
	for _, q := range reqs {
		if q.Got == 0 {
			continue // no answer: the sender reported it (transport)
		}
		t := &per[q.Replica]
		ids := int64(1)
		if q.Kind == "list" {
			ids = int64(len(q.Ids))
		} else {
			t.reads++
		}
		switch q.Got {
		case http.StatusOK:
			if q.Kind != "list" {
				t.readsOK++
			}
		case http.StatusServiceUnavailable:
			t.n503++
			t.refused += ids
			if s, err := strconv.Atoi(q.GotRetryAfter); err != nil || s < 1 {
				ch.Violate("queue", "%s: 503 with Retry-After %q, want whole seconds (RFC 9110 §10.2.3)", q, q.GotRetryAfter)
			}
		case http.StatusGatewayTimeout:
			t.n504++
			t.late += ids
		default:
			ch.Violate("queue", "%s: answered %d; a queue round's ids are all good: 200, 503 (refused) or 504 (not sent in time) only", q, q.Got)
		}
	}
	for i, t := range per {
		if t.reads > 0 && t.readsOK == 0 {
			ch.Violate("queue-fair", "replica %d: none of %d one-id reads answered 200 while lists held the queue (%d answers 503, %d 504)", i, t.reads, t.n503, t.n504)
		}
		full := after[i].QueueFull - before[i].QueueFull
		late := after[i].Deadline - before[i].Deadline
		if full != t.refused {
			ch.Violate("queue-metric", "replica %d: sidecache_batch_dropped_total{reason=\"queue-full\"} grew by %d, but its clients were refused %d ids (%d answers 503)", i, full, t.refused, t.n503)
		}
		if (late > 0) != (t.n504 > 0) || late > t.late {
			ch.Violate("queue-metric", "replica %d: sidecache_batch_dropped_total{reason=\"deadline\"} grew by %d, but its clients saw %d answers 504 of %d ids", i, late, t.n504, t.late)
		}
		ch.Count("queue-503", t.n503)
		ch.Count("queue-504", t.n504)
		ch.Count("queue-reads-200", t.readsOK)
	}
}
