package report

import (
	"fmt"
	"time"

	"github.com/sidecache/sidecache/bench/internal/lab"
)

// batchFloor is the batched miss beside its Go reference, when the batch
// row measured it: per sidecar, its batched miss ÷ its L1 hit (the goal),
// the floor (bare Go's batched miss ÷ bare Go's hit on the same ids:
// batching done the plain way, with the standard library),
// what the sidecar's miss adds to its hit over what batching adds to bare
// Go's (µs, GOMAXPROCS=1 only, as the L2 extra), and the requests per
// bulk call of both, which the per-request cost of a call depends on.
func (r *CPUReport) batchFloor(w func(string, ...any), names []string, ratio func(a, b time.Duration) string) {
	bareMiss, bareHit := r.cpuOf(lab.BareBatchServer), r.cpuOf(lab.BareBatchHitServer)
	if bareMiss == 0 && bareHit == 0 {
		return
	}
	leanMiss := r.cpuOf(lab.BareBatchLeanServer)
	floor, barePerBulk := ratio(bareMiss, bareHit), r.perBulkOf(lab.BareBatchServer)
	leanFloor, leanPerBulk := ratio(leanMiss, bareHit), r.perBulkOf(lab.BareBatchLeanServer)
	w("| sidecar | batched miss ÷ hit (goal ≤ 1.3×) | floor of the batched goal (bare Go GOMAXPROCS=1: batched miss ÷ from memory) | the floor with sidecache's splitter | batched miss's extra ÷ bare Go's batched extra (µs over the hit, GOMAXPROCS=1) | the extra over bare Go's with sidecache's splitter | requests per bulk call: sidecar / bare Go / bare Go with sidecache's splitter |")
	w("|---|---:|---:|---:|---:|---:|---:|")
	for _, n := range names {
		batch := r.cpuOf(n + " (batched miss)")
		if batch == 0 {
			continue
		}
		hit := r.cpuOf(n + " (L1 hit)")
		w("| %s | %s | %s | %s | %s | %s | %s / %s / %s |", n, ratio(batch, hit), floor, leanFloor,
			extraRatio(n, batch, hit, bareMiss, bareHit), extraRatio(n, batch, hit, leanMiss, bareHit),
			r.perBulkOf(n+" (batched miss)"), barePerBulk, leanPerBulk)
	}
	w("")
	w("The batched floor: *%s* is the bench's bare net/http server in its batching mode (`bench -serve-bare … -batch`), one core as sidecache by default, "+
		"in the same rounds at the same rate: each GET /users/{id} it does not hold waits in its own goroutine while a window gathers the ids "+
		"(the cache+batch sidecar's max_size and max_wait, and its adaptive rule: the window stays open while a bulk call is in flight), "+
		"one GET /users?ids=… to the same demo over a keep-alive net/http client, the JSON array split by encoding/json's Decoder into json.RawMessage elements, "+
		"each stored in a map with an ETag made by sidecache's own function, then the waiters woken and answered from the map. It asks the ids "+
		"sidecache's batched miss asked in the same round, in its order, its map emptied before each round; *%s* asks them again, from memory. "+
		"The floor is its miss ÷ its hit: the work no batching server can skip (a waiting goroutine per request, the window, one call, reading and splitting the answer, storing, waking) "+
		"done the plain way, with the standard library alone. A sidecar above it spends more on a miss than that plain server does; "+
		"one below it already does these parts more cheaply than the standard library (sidecache has its own upstream client and splitter), "+
		"and what is left of the goal is then in its own parts, not in Go's. "+
		"The extra is the sidecar's batched miss minus its L1 hit over bare Go's miss minus its hit, both in µs at GOMAXPROCS=1: "+
		"1.00× means sidecache's miss adds to its hit what the plain server's adds to its own, above it more "+
		"(isolation, coalescing, the L1's store, its Cache-Status, Via and Age), below it less. A call's cost is shared by its requests, so compare the requests per bulk call: "+
		"the fuller calls are the cheaper per request. "+
		"*%s* is the same server splitting each answer with sidecache's own splitter (bulk.SplitFor over the whole body, each element copied) "+
		"in place of encoding/json, read against the same from-memory row: the floor left when the standard library's dearest part is done as sidecache does it, "+
		"Go's plumbing alone (net/http on both sides, a goroutine per waiter, the window, one map); a sidecar still above it spends its own overhead there.",
		lab.BareBatchServer, lab.BareBatchHitServer, lab.BareBatchLeanServer)
	w("")
}

// perBulkOf is the median round's requests per bulk call of the row named
// server, "—" when none was counted.
func (r *CPUReport) perBulkOf(server string) string {
	for _, c := range r.Results {
		if c.Server == server && len(c.PerBulk) > 0 {
			return fmt.Sprintf("%.1f", c.PerBulk[(len(c.PerBulk)-1)/2])
		}
	}
	return "—"
}
