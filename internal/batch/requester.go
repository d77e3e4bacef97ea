package batch

import "math"

// Requester is one client request's account with a Loader: the calls its
// ids may still cause past the ones they need anyway. Loads of one client
// request (the ids of a list) share one Requester; a Load with a nil
// Requester is a client request of one id. Its fields are guarded by the
// Loader's mutex.
type Requester struct {
	budget int // Budget(n)
	firsts int // ⌈n/MaxSize⌉: the first calls its ids need anyway
	calls  int // calls counted against it so far
	first  int // of which first calls
}

// afford reports whether r may cause cost more retries, keeping what its
// ids' first calls still need, and if so counts them.
func (r *Requester) afford(cost int) bool {
	if r.calls+max(r.firsts-r.first, 0)+cost > r.budget {
		return false
	}
	r.calls += cost
	return true
}

// open counts a batch one of r's ids is opening, and reports whether r
// may open it: always for the first calls its ids need, then within its
// budget. Joining a batch already open costs r nothing, whoever opened it:
// that batch goes whatever r does (a list whose ids reached the loader
// over several windows, each joining a batch another request had opened,
// ran out of budget with a healthy upstream and answered 502). A batch r
// opened and its other ids join is counted once, here.
func (r *Requester) open() bool {
	if r == nil {
		return true
	}
	if r.first >= r.firsts && r.calls+1 > r.budget {
		return false
	}
	r.first++
	r.calls++
	return true
}

// Budget is the most upstream calls one client request of n ids may cause,
// whatever the upstream answers: ⌊2 + 2·log₂ n⌋. That is one shared call,
// one call of its own ids when the shared call failed, and two calls per
// halving of its ids, enough to find one bad id among n.
func Budget(n int) int {
	return int(2 + 2*math.Log2(float64(max(n, 1))))
}

// Requester opens the account of one client request of n ids (a list;
// one-id requests pass a nil Requester to LoadAs). Of its Budget, the
// ⌈n/MaxSize⌉ calls its ids need anyway are set aside; the rest bounds the
// isolation calls and quarantined ids' own calls it may cause.
func (l *Loader[A, V]) Requester(n int) *Requester {
	n = max(n, 1)
	return &Requester{budget: Budget(n), firsts: (n + l.opts.MaxSize - 1) / l.opts.MaxSize}
}
