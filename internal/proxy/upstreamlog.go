package proxy

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/sidecache/sidecache/internal/lograte"
)

// Upstream failure lines are bounded (lograte): an outage at thousands of
// requests per second logs upstreamLogMax lines a second, the next one
// saying how many were left out.
const (
	upstreamLogMax   = 10
	upstreamLogEvery = time.Second
)

func newUpstreamLog(now func() time.Time) *lograte.Limiter {
	return lograte.New(upstreamLogMax, upstreamLogEvery, now)
}

// logUpstream writes the one WARN line of a request answered 502 or 504
// because the upstream failed, on whichever path it took (lean or
// ReverseProxy pass-through, cached fill, batch, split): an operator in an
// incident reads the same line for every failure. A client that went away
// is not an upstream failure (the access log has it as 499).
func (h *Handler) logUpstream(r *http.Request, route string, code int, err error) {
	if r.Context().Err() != nil {
		return
	}
	ok, suppressed := h.upLog.Allow()
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
	h.log.LogAttrs(r.Context(), slog.LevelWarn, "upstream failed", attrs...)
}
