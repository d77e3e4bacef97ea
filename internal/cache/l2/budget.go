package l2

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/sidecache/sidecache/internal/redisbudget"
)

// ErrBudget is returned, without a call made, when the request's Redis
// budget is spent (internal/redisbudget): its earlier calls took the
// whole Timeout between them. The request goes on as after any failed
// call: from L1 and the upstream.
var ErrBudget = errors.New("l2: the request's redis budget is spent")

// span is one call a request waits on, charged to its budget: the call's
// deadline is Timeout from its start, or sooner when the budget has less
// left (cut).
type span struct {
	b     *redisbudget.Budget // nil: a call with no request's budget
	start time.Time
	dl    time.Time
	cut   bool
}

// begin starts a call at start under ctx's budget, if any; ErrBudget
// when it is spent, so that no command is sent.
func (s *Store) begin(ctx context.Context, start time.Time) (span, error) {
	sp := span{b: redisbudget.From(ctx), start: start, dl: start.Add(s.opts.Timeout)}
	if sp.b == nil {
		return sp, nil
	}
	left := sp.b.Left(s.opts.Timeout)
	if left <= 0 {
		return sp, ErrBudget
	}
	if left < s.opts.Timeout {
		sp.dl, sp.cut = start.Add(left), true
	}
	return sp, nil
}

// withBudget is withTimeout for a call a request waits on: its context
// ends at the span's deadline.
func (s *Store) withBudget(ctx context.Context) (context.Context, context.CancelFunc, span, error) {
	sp, err := s.begin(ctx, time.Now())
	if err != nil {
		return ctx, func() {}, sp, err
	}
	cctx, cancel := context.WithDeadline(ctx, sp.dl)
	return cctx, cancel, sp, nil
}

// end charges the call's time to the budget and records its outcome for
// the breaker (done). A call whose deadline the budget cut short and that
// ran out of it is not counted: Redis did not miss Timeout, only what the
// request had left of it (a refused or reset connection, an error reply
// still count).
func (s *Store) end(ctx context.Context, sp span, err error) {
	if sp.b != nil {
		sp.b.Spend(time.Since(sp.start))
	}
	if err != nil && sp.cut && timedOut(err) {
		s.log.Debug("redis call cut by the request's budget, not counted against redis", "err", err)
		return
	}
	s.doneAt(ctx, err, sp.start)
}

// timedOut reports whether err is a deadline's: the context's, or a
// socket's (go-redis sets the connection's deadline from the context).
func timedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
