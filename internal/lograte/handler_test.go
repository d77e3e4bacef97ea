package lograte

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestHandler(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	tests := []struct {
		name string
		run  func(log *slog.Logger)
		want map[string]int // message → lines written
		more []string       // substrings the output must hold
	}{
		{
			name: "each kind its own bound",
			run: func(log *slog.Logger) {
				for range 50 {
					log.Warn("frequent")
				}
				log.Warn("rare")
			},
			want: map[string]int{"msg=frequent": 3, "msg=rare": 1},
		},
		{
			name: "derived loggers share the bound",
			run: func(log *slog.Logger) {
				for i := range 10 {
					log.With("component", i).WithGroup("g").Warn("same")
				}
			},
			want: map[string]int{"msg=same": 3},
		},
		{
			name: "the next window says how many were left out",
			run: func(log *slog.Logger) {
				for range 10 {
					log.Warn("burst")
				}
				now = now.Add(time.Hour)
				log.Warn("burst")
			},
			want: map[string]int{"msg=burst": 4},
			more: []string{"suppressed=7"},
		},
		{
			name: "varying messages share one bound past maxKinds",
			run: func(log *slog.Logger) {
				for i := range maxKinds + 100 {
					log.Warn(fmt.Sprintf("http: TLS handshake error from 10.0.0.%d", i))
				}
			},
			want: map[string]int{"TLS handshake error": maxKinds + 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			h := NewHandler(slog.NewTextHandler(&out, nil), 3, time.Hour, clock) // no flush fires in the test
			tt.run(slog.New(h))
			for s, n := range tt.want {
				if got := strings.Count(out.String(), s); got != n {
					t.Errorf("%d lines with %q, want %d:\n%s", got, s, n, out.String())
				}
			}
			for _, s := range tt.more {
				if !strings.Contains(out.String(), s) {
					t.Errorf("no %q in:\n%s", s, out.String())
				}
			}
			if len(h.s.by) > maxKinds {
				t.Errorf("%d limiters kept, at most %d", len(h.s.by), maxKinds)
			}
		})
	}
}

// A level the next handler refuses is refused before any limiter: debug
// lines at the info level do not use up a kind's lines.
func TestHandlerLevelFirst(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(NewHandler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}), 1, time.Hour, nil))
	for range 5 {
		log.Debug("x")
	}
	log.Info("x")
	if got := strings.Count(out.String(), "msg=x"); got != 1 {
		t.Fatalf("%d lines, want the info one:\n%s", got, out.String())
	}
}

// TestHandlerFlushesTheTail: a burst whose kind logs nothing more is not
// lost: at the end of the window its last refused line is written, with
// how many others were left out; a line allowed meanwhile has told them,
// and then nothing more is written. Prober: 40 PATCHes with Redis stalled
// logged 10 lines and never said 30 were left out.
func TestHandlerFlushesTheTail(t *testing.T) {
	now := time.Unix(1000, 0)
	var out bytes.Buffer
	h := NewHandler(slog.NewTextHandler(&out, nil), 2, time.Hour, func() time.Time { return now })
	log := slog.New(h)
	for i := range 5 {
		log.Warn("burst", "i", i)
	}
	h.s.flush(h.s.kind("burst"))
	if got := strings.Count(out.String(), "msg=burst"); got != 3 {
		t.Fatalf("%d lines, want 2 and the tail:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), "i=4 suppressed=2") {
		t.Fatalf("the tail is not the last line with the 2 others left out:\n%s", out.String())
	}
	h.s.flush(h.s.kind("burst"))
	if got := strings.Count(out.String(), "msg=burst"); got != 3 {
		t.Fatalf("a second flush wrote again:\n%s", out.String())
	}

	// A refused line, then the next window's allowed one tells it: the
	// flush then writes nothing.
	log.Warn("burst", "i", 5)
	now = now.Add(time.Hour)
	log.Warn("burst", "i", 6)
	h.s.flush(h.s.kind("burst"))
	if got := strings.Count(out.String(), "msg=burst"); got != 4 || !strings.Contains(out.String(), "i=6 suppressed=1") {
		t.Fatalf("want the allowed line to carry the count, and no flush line:\n%s", out.String())
	}
}
