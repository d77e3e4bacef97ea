// Package lograte bounds how many lines of one kind a process logs, so that
// an upstream outage at thousands of requests per second gives the operator
// a readable log instead of a flood (and a log pipeline that keeps up),
// while saying how many lines were left out.
//
// It is a fixed window: at most Max lines per Every; the first line allowed
// after some were refused reports how many, as NGINX's limit_req logs a
// refused request once per burst rather than once per request.
package lograte

import (
	"sync"
	"time"
)

// Limiter decides whether one more line may be written. The zero value is
// unusable; use New. It is safe for concurrent use.
type Limiter struct {
	max   int
	every time.Duration
	now   func() time.Time

	mu         sync.Mutex
	start      time.Time // of the current window
	n          int       // lines allowed in it
	suppressed int       // lines refused since the last allowed one
}

// New allows max lines per every, judged by now (nil: time.Now).
func New(max int, every time.Duration, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{max: max, every: every, now: now}
}

// Allow reports whether to write the line, and, when it does, how many
// lines were refused since the last one allowed (to log with it).
func (l *Limiter) Allow() (ok bool, suppressed int) {
	t := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.Sub(l.start) >= l.every || t.Before(l.start) {
		l.start, l.n = t, 0
	}
	if l.n >= l.max {
		l.suppressed++
		return false, 0
	}
	l.n++
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

// TakeSuppressed returns how many lines were refused since the last one
// allowed, and forgets them: for a caller that reports them itself once
// no more lines of the kind come (Handler's end of a burst).
func (l *Limiter) TakeSuppressed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.suppressed
	l.suppressed = 0
	return n
}
