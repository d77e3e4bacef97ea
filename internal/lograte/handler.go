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
// too). A burst's tail is not lost either: when no line of the kind is
// allowed within every of one refused, the last refused line is written
// then, with how many were left out.
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
	by    map[string]*kind
	other *kind // lines whose message came after maxKinds others
}

// kind is one message's bound, and the last line it refused while no
// other has been allowed since (written at the end of the burst: flush).
type kind struct {
	lim     *Limiter
	pending *slog.Record // guarded by kinds.mu
	next    slog.Handler // pending's handler
	armed   bool         // a flush is due
}

// NewHandler wraps next so that each message is written at most max times
// per every, judged by now (nil: time.Now).
func NewHandler(next slog.Handler, max int, every time.Duration, now func() time.Time) *Handler {
	if now == nil {
		now = time.Now
	}
	return &Handler{next: next, s: &kinds{
		max: max, every: every, now: now,
		by: make(map[string]*kind), other: &kind{lim: New(max, every, now)},
	}}
}

func (k *kinds) kind(msg string) *kind {
	k.mu.Lock()
	defer k.mu.Unlock()
	if c, ok := k.by[msg]; ok {
		return c
	}
	if len(k.by) >= maxKinds {
		return k.other
	}
	c := &kind{lim: New(k.max, k.every, k.now)}
	k.by[msg] = c
	return c
}

// Enabled reports what next does: a line refused by its level costs no
// limiter.
func (h *Handler) Enabled(ctx context.Context, lv slog.Level) bool {
	return h.next.Enabled(ctx, lv)
}

// Handle writes r unless its kind has had its lines for this window.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	c := h.s.kind(r.Message)
	ok, suppressed := c.lim.Allow()
	if !ok {
		rc := r.Clone()
		h.s.mu.Lock()
		c.pending, c.next = &rc, h.next
		arm := !c.armed
		c.armed = true
		h.s.mu.Unlock()
		if arm {
			time.AfterFunc(h.s.every, func() { h.s.flush(c) })
		}
		return nil
	}
	if suppressed > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("suppressed", suppressed))
	}
	return h.next.Handle(ctx, r)
}

// flush writes c's last refused line, once every has passed since the
// first refused: unless a line allowed since has reported them, the lines
// left out are reported with it (that line one of them).
func (k *kinds) flush(c *kind) {
	k.mu.Lock()
	rec, next := c.pending, c.next
	c.pending, c.next, c.armed = nil, nil, false
	k.mu.Unlock()
	if rec == nil {
		return
	}
	n := c.lim.TakeSuppressed()
	if n == 0 {
		return // an allowed line has told them
	}
	r := rec.Clone()
	if n > 1 {
		r.AddAttrs(slog.Int("suppressed", n-1))
	}
	_ = next.Handle(context.Background(), r)
}

// WithAttrs returns a Handler sharing h's limiters.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(as), s: h.s}
}

// WithGroup returns a Handler sharing h's limiters.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), s: h.s}
}
