// Package upstreamlog writes the one WARN line of a request answered 502
// or 504 because the upstream failed, on whichever path it took
// (pass-through, cached fill, batch, split): an operator in an incident
// reads the same line for every failure. The lines are bounded
// (internal/lograte): an outage at thousands of requests per second logs
// Max lines a second, the next one saying how many were left out.
package upstreamlog

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/sidecache/sidecache/internal/lograte"
)

// Max lines are written per Every.
const (
	Max   = 10
	Every = time.Second
)

// Logger writes upstream failure lines. It is safe for concurrent use.
type Logger struct {
	log *slog.Logger
	lim *lograte.Limiter
}

// New returns a Logger writing to log, its window on now's clock.
func New(log *slog.Logger, now func() time.Time) *Logger {
	return &Logger{log: log, lim: lograte.New(Max, Every, now)}
}

// Failed logs that r's upstream call, on route, failed with err and was
// answered code. A client that went away is not an upstream failure (the
// access log has it as 499): nothing is logged.
func (l *Logger) Failed(r *http.Request, route string, code int, err error) {
	if r.Context().Err() != nil {
		return
	}
	ok, suppressed := l.lim.Allow()
	if !ok {
		return
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.String("route", route), slog.Int("status", code), slog.Any("err", err),
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int("suppressed", suppressed))
	}
	l.log.LogAttrs(r.Context(), slog.LevelWarn, "upstream failed", attrs...)
}
