// Package splitpart holds the ids of one split list request
// (GET /users?ids=3,1,2, answered per id from a batch route's cache), each
// settled from its read or its fetch, and assembles the list from them,
// as the upstream would answer it and within max_body_bytes:
//
//   - a list is answered per id only when it is spelled as asked
//     (AsAsked): each id once, each the one way the cache stores it;
//   - one rule settles an id's outcome (Part.Settle), whichever call
//     brought it: a failure serves the copy held for stale-if-error
//     (RFC 5861 §4), a record too large to keep passes the list through;
//   - the list holds at most max_body_bytes of elements (Parts.Fetch),
//     the SPEC's bound on one response, however many calls bring them;
//   - an id the upstream refuses refuses the list, one it does not know
//     is left out, as an SQL IN (…) leaves it out (Parts.Join).
//
// The per-id request, its reads and its fetch are the caller's (the
// proxy's exchange): Part carries it as X.
package splitpart

import (
	"context"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sidecache/sidecache/internal/bulkanswer"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/spelling"
	"github.com/sidecache/sidecache/internal/splitlist"
	"github.com/sidecache/sidecache/internal/upfail"
)

// AsAsked is why a list cannot be answered per id as the upstream would
// answer it, "" when it can. ids are list's distinct ids (bulk.ParseIDs).
//
// An id asked twice: whether the upstream lists it once (an SQL IN (…),
// as the bundled demo does) or once per time asked (a loop over the ids)
// is the upstream's own choice, which the sidecar cannot know; an answer
// assembled either way was wrong for the other kind (?ids=5,5).
//
// An id not spelled the one way the cache stores it (05, +5, 5;v=1:
// spelling.CanonicalParam), as a read of the id alone must be to be
// cached: the upstream reads 05 as 5, and its bulk answer names the
// element 5, not 05, so an answer assembled per id left it out (?ids=05
// answered [] where the upstream gives user 5), and stored under
// /users/05 a 404 the upstream never gave.
//
// Either way the list passes through whole, the upstream's own answer.
func AsAsked(list string, ids []string) string {
	if strings.Count(list, ",")+1 != len(ids) {
		return "split-repeat"
	}
	for _, id := range ids {
		if !spelling.CanonicalParam(id) {
			return "split-spelling"
		}
	}
	return ""
}

// Part is one distinct id of a list request; X is its per-ID request.
type Part[X any] struct {
	X   X
	E   *cache.Entry
	Err error
	// Held is a stale entry kept for stale-if-error, as a per-ID
	// request keeps one; Stale: E is stale, served while it is
	// revalidated or because its fetch failed.
	Held  *cache.Entry
	Stale bool
	// Foreign: its batched answer was made for another request
	// (bulkanswer.Answer.NotFor); the caller asks for it again, and
	// settles it then.
	Foreign bool
}

// Parts are a list's parts by id.
type Parts[X any] map[string]*Part[X]

// Settle gives p the outcome of its id's fetch, e or err: the batched
// fetch's (Fetch) or, for an id answered for another request, the list's
// own call's. One rule for both, as a request for the id alone has:
//   - a record too large to keep (bulkanswer.ErrElementTooLarge), or an
//     id its bulk answer named otherwise (bulkanswer.ErrUnattributed), is no
//     upstream failure, so no stale copy answers for it: the list passes
//     through to the upstream's (Join), as GET of the id alone does;
//   - a failure (err, or a 5xx: idFailed) serves the copy held for
//     stale-if-error (RFC 5861 §4), counted in Cache-Status as stale;
//   - else the failure is the list's 502.
func (p *Part[X]) Settle(e *cache.Entry, err error) {
	if err == nil {
		err = idFailed(e)
	}
	switch {
	case err == nil:
		p.E, p.Err = e, nil
	case p.Held != nil && !bulkanswer.Passes(err):
		p.E, p.Stale, p.Err = p.Held, true, nil
	default:
		p.E, p.Err = nil, err
	}
}

// within keeps p's element if the list's held bytes stay within limit
// with it, and else drops it for errListTooLarge, and its bytes with it:
// held counts what the list holds, never what it dropped. The stale copy
// held for p, settled, is given back either way. An answer that adds
// nothing to the list (a 404 left out, a refusal: entryBytes 0) is never
// dropped: it cannot take the list past the bound, and held may be over
// it for a moment while another part's element, about to be dropped, is
// counted. Run on p's goroutine, once p is settled.
func (p *Part[X]) within(held *atomic.Int64, limit int64) {
	if p.Foreign {
		return // not settled yet: the caller asks again (Join counts it)
	}
	if p.Held != nil {
		held.Add(-entryBytes(p.Held))
		p.Held = nil
	}
	if p.E == nil {
		return
	}
	n := entryBytes(p.E)
	if n > 0 && held.Add(n) > limit {
		held.Add(-n)
		p.E, p.Stale, p.Err = nil, false, errListTooLarge
	}
}

// idFailed is the list's failure for an id whose answer is a 5xx (502:
// the upstream's failure, never its body in the list), nil otherwise.
func idFailed(e *cache.Entry) error {
	if e.Status >= 500 {
		return &upfail.Error{Code: http.StatusBadGateway, Err: fmt.Errorf("split: id status %d", e.Status)}
	}
	return nil
}

// Fetch fetches the id of every part not read from the cache (E nil),
// each with fetch on a goroutine of its own, and settles it (Settle) but
// for one whose answer was made for another request (foreign, and not a
// failure: Foreign set, for the caller to ask again). e is the answer
// when err is nil.
//
// The bytes of the elements the list holds: an element that takes them
// past limit (max_body_bytes) is dropped as it comes, and the list passes
// through (Join), so a list of large records never holds more than the
// bound of them, however many calls bring them.
//
// A panic in a fetch is the id's 502, as a panicked bulk fetch answers
// its waiters (batch.Options.OnPanic): the goroutine is Fetch's own,
// where nothing else would recover it and the process would die. A bug,
// not the upstream: panicked is told, with the stack, to log it; the
// list's answer carries no stack.
func (ps Parts[X]) Fetch(ctx context.Context, limit int64, fetch func(context.Context, X) (e *cache.Entry, foreign bool, err error), panicked func(x X, v any, stack []byte)) {
	var held atomic.Int64
	held.Store(ps.Bytes())
	var wg sync.WaitGroup
	for _, p := range ps {
		if p.E != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer p.within(&held, limit)
			defer func() {
				// recover called here, by the deferred function itself
				// (a generic method deferred may be called through a
				// wrapper).
				if v := recover(); v != nil {
					panicked(p.X, v, debug.Stack())
					p.E, p.Err = nil, &upfail.Error{Code: http.StatusBadGateway, Err: fmt.Errorf("split: id fetch panicked: %v", v)}
				}
			}()
			e, foreign, err := fetch(ctx, p.X)
			if err == nil && foreign && idFailed(e) == nil {
				p.Foreign = true
				return
			}
			if err != nil {
				e = nil
			}
			p.Settle(e, err)
		}()
	}
	wg.Wait()
}

// Join assembles the answer of the list of ids (in the order asked) from
// their parts, an id without one (not an id of the target route) left
// out: l, of which stale elements are stale copies. Or, when an id's
// outcome fails the list, bad, the first such part in the order asked:
//   - bad.Err wraps bulkanswer.ErrElementTooLarge: an element too large
//     to keep, or the elements together (errListTooLarge,
//     bulkanswer.ErrAnswerTooLarge): the list cannot be assembled within
//     max_body_bytes, and the upstream's own list answers, streamed;
//   - bad.Err is another failure: the list's;
//   - else bad.E is the upstream's own answer to this id alone, refusing
//     it (a 4xx other than 404 and 410), never stored: the list is
//     refused with it, as the app's list endpoint refuses a query holding
//     the id, rather than told the id does not exist (200 with it left
//     out).
func (ps Parts[X]) Join(ids []string, keyed ...string) (l splitlist.List, stale int, bad *Part[X]) {
	l = splitlist.Make(len(ps), keyed...)
	for _, id := range ids {
		p := ps[id]
		if p == nil {
			continue // not an id of the target route
		}
		if p.Err != nil || refusedID(p.E.Status) {
			return l, stale, p
		}
		if p.Stale {
			stale++
		}
		l.Add(p.E.Status, p.E.Header, p.E.Body)
	}
	return l, stale, nil
}

// refusedID reports whether an id's answer is the upstream refusing it
// (a 4xx other than 404 and 410, which say the id is unknown: those are
// left out of the list, as SQL's IN (…) leaves them out).
func refusedID(status int) bool {
	return status >= 400 && status <= 499 && status != http.StatusNotFound && status != http.StatusGone
}

// errListTooLarge is a split list's element dropped because the list's
// elements together are over max_body_bytes (Part.within): the list
// passes through, as it does for an element too large to keep.
var errListTooLarge = fmt.Errorf("split list over max_body_bytes: %w", bulkanswer.ErrElementTooLarge)

// entryBytes is what an entry adds to a list's answer: its body and a
// comma, for an element (200); nothing for an id left out.
func entryBytes(e *cache.Entry) int64 {
	if e.Status != http.StatusOK {
		return 0
	}
	return int64(len(e.Body)) + 1
}

// Has reports whether id is one of the list's ids.
func (ps Parts[X]) Has(id string) bool { return ps[id] != nil }

// Bytes is the size of the list's answer from the elements its parts
// hold, and of the stale copies they hold for stale-if-error: what the
// list holds of max_body_bytes.
func (ps Parts[X]) Bytes() int64 {
	var n int64
	for _, p := range ps {
		if p.E != nil {
			n += entryBytes(p.E)
		}
		if p.Held != nil {
			n += entryBytes(p.Held)
		}
	}
	return n
}
