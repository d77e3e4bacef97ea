package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/sidecache/sidecache/internal/redisbudget"
	"github.com/sidecache/sidecache/internal/spelling"
	"github.com/sidecache/sidecache/internal/writeinv"
)

// A write invalidates what it may have changed, and only that, once the
// upstream has had its say (internal/writeinv holds the rules: which tags
// for which answer, and how many). A client that hangs up after sending a
// whole write does not cancel it: the upstream's answer still decides,
// within upstream.timeout (internal/detached). The tombstones are bounded
// by bytes, and an epoch key Redis evicts reads as a miss.

// writeInv is an unsafe request's invalidation, waiting for the upstream's
// answer. It keeps no reference to the exchange, so that stays on the
// stack.
type writeInv struct {
	h  *Handler
	st *state
	r  *http.Request
	p  writeinv.Plan
}

// writeInvalidation is x's invalidation, nil when x's request invalidates
// nothing whatever the answer.
func (x *exchange) writeInvalidation() *writeInv {
	if x.h.inv == nil {
		return nil
	}
	p, ok := writeinv.New(writeinv.Options{Table: x.st.table, MaxKey: x.h.maxKey, Upstream: x.st.up.Host, NoURIs: x.h.cache == nil}, x.r)
	if !ok {
		return nil
	}
	return &writeInv{h: x.h, st: x.st, r: x.r, p: p}
}

// refuseSpellings answers 400, unsent, to a write whose path reads as
// more combinations of integers than spelling.MaxFolds
// (writeinv.Plan.TooManySpellings): the origin would apply it to one of
// them, and the sidecar cannot drop them all within its bound. No app
// links such a path; the bound is hit by a client's crafting alone.
func (x *exchange) refuseSpellings() {
	x.badRequest("write-spellings", fmt.Sprintf("the path's ids read as more than %d combinations of integers\n", spelling.MaxFolds))
}

// refuseIDs answers 400, unsent, to a write to a list endpoint whose
// query names more ids than maxIDs, the endpoint's bound
// (writeinv.Plan.TooManyIDs): the origin would change each, and the
// sidecar cannot drop them all within its bound. A split list of as many
// is refused so too (split.go, badIDList).
func (x *exchange) refuseIDs(maxIDs int) {
	x.badRequest("write-ids", fmt.Sprintf("the query names more than %d distinct ids (or ids of too many spellings) for one write to this list endpoint\n", maxIDs))
}

// refuseOverride answers 400, unsent, to a safe method (GET, HEAD,
// OPTIONS, TRACE) that carries a method override field naming a write
// (httpcache.Overridden): some apps apply it as that write (the override
// middleware Flask's documentation gives reads it on any method), others
// answer it as the read. The sidecar cannot know which: taken for a read
// (a bypass or pass-through forwards the field), such a write dropped
// nothing of what it changed; taken for a write, any client could drop
// any entry with a GET the app answers 200. The request is ambiguous, as
// one with both Content-Length and Transfer-Encoding is, and refused as
// such: a client that means the write sends it as one.
func (x *exchange) refuseOverride() {
	x.badRequest("method-override", "a method override field on a safe method\n")
}

// refuseMethodCase answers 400, unsent, to a method spelled with a
// lower-case letter whose upper case the sidecar knows
// (httpcache.MisspelledMethod): "get" is no GET to the sidecar (RFC 9110
// §9.1), but an app that folds case applies it as one. Forwarded as a
// write, a read the app answers 200 dropped its URI on every replica;
// forwarded as the read, "patch" dropped nothing the write route names.
// NGINX answers 400 to any method with a lower-case letter.
func (x *exchange) refuseMethodCase() {
	x.badRequest("method-case", "the method is spelled in a case other than its registered one (upper case)\n")
}

// badRequest answers 400 with msg (plain text, no body to a HEAD), the
// sidecar's own refusal of what the client sent, detail naming it in
// Cache-Status; msg never holds what the client sent.
func (x *exchange) badRequest(detail, msg string) {
	s := x.status(outBypass, nil, 0)
	s.Detail = detail
	hd := x.w.Header()
	hd.Set("Cache-Status", s.String())
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("X-Content-Type-Options", "nosniff")
	x.w.WriteHeader(http.StatusBadRequest)
	if x.r.Method != http.MethodHead {
		_, _ = io.WriteString(x.w, msg)
	}
	x.count(outcomes[outBypass].result)
}

// after applies the invalidation for the upstream's answer: its status
// and header, or code 0 when the request was sent whole and no answer came.
// It is not called for a request that never reached the upstream whole.
func (w *writeInv) after(code int, answer http.Header) {
	kept, skipped := w.p.Tags(code, answer)
	kept, skipped = w.reloaded(code, answer, kept, skipped)
	if skipped > 0 {
		w.h.m.InvalidationSkipped(skipped)
	}
	if len(kept) == 0 {
		return
	}
	w.h.Invalidated(kept...)
	// One Redis budget for the flush and the epochs' pipeline
	// (internal/redisbudget): the write's answer waits on Redis at most
	// l2.redis.timeout; what did not fit is replayed, and the answer then
	// waits for the replay only under coherence.write_hold, a bound of
	// its own (internal/server, hold.go).
	ctx, cancel := context.WithTimeout(redisbudget.New(context.WithoutCancel(w.r.Context())), w.st.timeout)
	defer cancel()
	if err := w.h.inv.InvalidateTags(ctx, kept...); err != nil {
		w.h.log.Warn("invalidate after write", "method", w.r.Method, "routes", w.p.Routes(), "tags", len(kept), "err", err)
	}
	w.h.m.Invalidation("write", len(kept))
}

// reloaded adds to tags (and to skipped) what the route table in force
// now invalidates for the write, when a reload swapped the table while
// the write was at the upstream. The plan was made under the table the
// write arrived under; a reload that regains an invalidate rule drops
// what the rule covers when it lands (internal/server's retire.go), but a
// read after it may fetch the version this write replaces before the
// upstream applies the write, and only the regained rule drops that
// copy. Planned under the old table alone, the write dropped its URI
// only, and the read's copy outlived the write's acknowledgement until
// its TTL. Lenient for invalidation: both tables' tags go.
func (w *writeInv) reloaded(code int, answer http.Header, tags []string, skipped int) ([]string, int) {
	cur := w.h.state.Load()
	if cur.table == w.st.table {
		return tags, skipped
	}
	p, ok := writeinv.New(writeinv.Options{Table: cur.table, MaxKey: w.h.maxKey, Upstream: w.st.up.Host, NoURIs: w.h.cache == nil}, w.r)
	if !ok || p.TooManySpellings() {
		return tags, skipped
	}
	more, n := p.Tags(code, answer)
	tags = append(tags, more...)
	slices.Sort(tags)
	return slices.Compact(tags), max(skipped, n)
}
