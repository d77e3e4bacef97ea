package check

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// Route s (split-stale, bulk-206): a batch route with stale_if_error (10
// minutes, longer than any run) whose bulk endpoint fails, hangs up,
// answers 206 or answers private, with its split list.
//
//   - part: no client ever receives an element of a 206 bulk answer
//     (origin.Stamp.Part), alone or in a list: only a 200 or 203 is the
//     whole list asked for (RFC 9110 §15.3.7);
//   - stale-if-error: once a client without Accept-Language received an
//     id's shareable element (no per-address stamp, not a part), a copy
//     is held for every later request of that variant (stored in both
//     tiers before the answer left, never invalidated: route s has no
//     writes); a later read or list of such ids alone from such a client
//     must never fail (5xx), whichever call failed — the batched one, or
//     the list's own call for ids answered for another request
//     (private); not a list the sidecar passes through whole (one that
//     names an id twice or spells one 05: list-as-asked), whose answer
//     is the origin's and stores nothing. Requests with Accept-Language or X-Tenant are left
//     out: whether a variant of theirs is held depends on the Vary the
//     origin chose round by round and on what the route learned, which
//     the checks do not follow. Nor a failure while its replica could
//     not read what it held (traffic.Request.Unreadable): the coherence
//     bound refused a stored entry (the replica's proof of hearing
//     invalidations was older than max_lag, so it serves no entry older
//     than that, stale-if-error copies included), or an L2 read failed;
//     counted as held-unreadable-s.
//
// Every element served stale is held to the identity and resource checks
// like any other (Answer); Checked counts split-stale-s (lists answered
// with stale=N) and stale-if-error-s (reads).

// checkPart reports an element of a 206 bulk answer that reached q.
func (ch *Checker) checkPart(q *traffic.Request, resp *http.Response, st origin.Stamp) {
	if st.Part {
		ch.Violate("bulk-206", "%s: answered %d with element %s of a 206 bulk answer (%s)", q, resp.StatusCode, st.Res, resp.Header.Get("Cache-Status"))
	}
}

// noteHeld records the ids of route s whose shareable element q's client
// received by end (held: stored for stale_if_error), sent at start: not
// while a purge or a Redis restart may drop the copies, nor for a
// request sent before the last of them was over (drop.go).
func (ch *Checker) noteHeld(q *traffic.Request, sts []origin.Stamp, start, end time.Time) {
	if q.Route != "s" || q.Sent["lang"] != "" || q.Sent["tenant"] != "" || q.Kind == "list" && PassesThrough(q.Ids) {
		return // a list passed through: nothing stored
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.dropping > 0 || !start.After(ch.dropped) {
		return
	}
	if ch.held == nil {
		ch.held = map[string]time.Time{}
	}
	for _, st := range sts {
		if st.Part || st.By["addr"] != "" {
			continue
		}
		k := ch.heldKey(st.Res, q)
		if at, ok := ch.held[k]; !ok || end.Before(at) {
			ch.held[k] = end
		}
	}
}

// checkHeld reports a failed read or list of route s whose ids all had a
// copy held before q was sent: one its replica confirmed holding before
// it was sent and still after it failed (q.Held: the runner's held.go
// asks the replica's admin GET /cache), or one a client was seen to
// receive (noteHeld), which also catches a copy never stored. Checked
// counts the requests each applies to: held-at-send-s (the replica held
// every id when it was sent) and held-inferred-s.
func (ch *Checker) checkHeld(q *traffic.Request, resp *http.Response, start time.Time) {
	if ch.cfg.NoHeld || q.Route != "s" || q.Sent["lang"] != "" || q.Sent["tenant"] != "" ||
		q.Kind == "list" && PassesThrough(q.Ids) { // the origin's own answer: no copy answers for it
		return
	}
	res := []string{q.Res}
	if q.Kind == "list" {
		res = res[:0]
		for _, id := range q.Ids {
			res = append(res, "s/"+id)
		}
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	inferred := true
	for _, r := range res {
		if at, ok := ch.held[ch.heldKey(r, q)]; !ok || !at.Before(start) {
			inferred = false
		}
	}
	if inferred {
		ch.checked["held-inferred-s"]++
	}
	if q.HeldAtSend {
		ch.checked["held-at-send-s"]++
	}
	if resp.StatusCode < 500 || !inferred && !q.Held {
		return
	}
	if q.Unreadable {
		// Its replica refused a stored entry to the coherence bound or
		// failed an L2 read while answering it: the copies were held
		// but not readable (the runner's held.go).
		ch.checked["held-unreadable-s"]++
		return
	}
	how := "a client received each of them before"
	if q.Held {
		how = "its replica held a copy of each before it was sent and after it failed (GET /cache; a client received each before: " + strconv.FormatBool(inferred) + ")"
	}
	ch.violations = append(ch.violations, Violation{Kind: "stale-if-error", Msg: q.String() + ": answered " +
		resp.Status + " though a copy of each of " + strings.Join(res, ",") + " was held for stale_if_error: " + how + " (" + resp.Header.Get("Cache-Status") + ")"})
}

// heldKey is where ch.held records res's copy for q: per replica when a
// copy is only sure to be held where it was received (Config.HeldLocal).
func (ch *Checker) heldKey(res string, q *traffic.Request) string {
	if ch.cfg.HeldLocal {
		return res + "@" + strconv.Itoa(q.Replica)
	}
	return res
}
