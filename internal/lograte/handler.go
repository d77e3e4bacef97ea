package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Handler bounds a process log line by line kind: each message gets its own
// Limiter, so that a line written once per request while Redis is down (or
// once per bulk call while an upstream misbehaves) is written at most max
// times per every, the next one allowed saying how many were left out, and
// a rare line is never crowded out by a frequent one. Every site that logs
// on a request's path is bounded this way at once, rather than each site
// remembering to (ARCHITECTURE: every resource has a bound, the log pipe
// too).
//
// Messages are the log sites' constant strings, so their number is fixed
// by the code; lines whose message varies (net/http's ErrorLog puts the
// client's address in its text) share one Limiter once maxKinds kinds are
// known, which keeps the map bounded whatever a client sends.
type Handler struct {
	next slog.Handler
	s    *kinds // shared with the handlers WithAttrs and WithGroup derive
}

// maxKinds bounds the limiters kept; beyond it lines share one.
const maxKinds = 256

type kinds struct {
	max   int
	every time.Duration
	now   func() time.Time

	mu    sync.Mutex
	by    map[string]*Limiter
	other *Limiter // lines whose message came after maxKinds others
}

// NewHandler wraps next so that each message is written at most max times
// per every, judged by now (nil: time.Now).
func NewHandler(next slog.Handler, max int, every time.Duration, now func() time.Time) *Handler {
	if now == nil {
		now = time.Now
	}
	return &Handler{next: next, s: &kinds{
		max: max, every: every, now: now,
		by: make(map[string]*Limiter), other: New(max, every, now),
	}}
}

func (k *kinds) limiter(msg string) *Limiter {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l, ok := k.by[msg]; ok {
		return l
	}
	if len(k.by) >= maxKinds {
		return k.other
	}
	l := New(k.max, k.every, k.now)
	k.by[msg] = l
	return l
}

// Enabled reports what next does: a line refused by its level costs no
// limiter.
func (h *Handler) Enabled(ctx context.Context, lv slog.Level) bool {
	return h.next.Enabled(ctx, lv)
}

// Handle writes r unless its kind has had its lines for this window.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	ok, suppressed := h.s.limiter(r.Message).Allow()
	if !ok {
		return nil
	}
	if suppressed > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("suppressed", suppressed))
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs returns a Handler sharing h's limiters.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(as), s: h.s}
}

// WithGroup returns a Handler sharing h's limiters.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), s: h.s}
}
