package server

import (
	"io"
	"log/slog"
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
