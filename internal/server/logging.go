package server

import (
	"io"
	"log/slog"
	"time"
)

// Each kind of process log line (its message) is written at most logLines
// times per logEvery; the next one says how many were left out. The
// figure is upstreamlog's, so an incident reads the same for every kind.
const (
	logLines = 10
	logEvery = time.Second
)

// NewLogger builds a logger in the config's log.format ("json", or text
// for anything else: config validation already refused other values),
// writing to w at the level lv reports. Passing a *slog.LevelVar makes the
// level reloadable.
func NewLogger(w io.Writer, format string, lv slog.Leveler) *slog.Logger {
	o := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}
