package upstreamlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/upstreamlog"
)

func lines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(b.Bytes()), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func TestFailedWritesOneWarnLine(t *testing.T) {
	var b bytes.Buffer
	l := upstreamlog.New(slog.New(slog.NewJSONHandler(&b, nil)), time.Now)
	l.Failed(httptest.NewRequest("GET", "/items/1?q=x", nil), "items", 502, errors.New("connection refused"))
	got := lines(t, &b)
	if len(got) != 1 {
		t.Fatalf("%d lines, want 1: %v", len(got), got)
	}
	want := map[string]any{"level": "WARN", "msg": "upstream failed", "method": "GET", "path": "/items/1", "route": "items", "status": 502.0, "err": "connection refused"}
	for k, v := range want {
		if got[0][k] != v {
			t.Errorf("%s = %v, want %v", k, got[0][k], v)
		}
	}
	if _, ok := got[0]["suppressed"]; ok {
		t.Error("suppressed on the first line")
	}
}

// A client that went away is not an upstream failure.
func TestClientGoneNotLogged(t *testing.T) {
	var b bytes.Buffer
	l := upstreamlog.New(slog.New(slog.NewJSONHandler(&b, nil)), time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l.Failed(httptest.NewRequest("GET", "/", nil).WithContext(ctx), "r", 504, context.Canceled)
	if b.Len() != 0 {
		t.Fatalf("logged %q for a client that left", b.String())
	}
}

// An outage logs Max lines per window; the first line of the next window
// says how many were left out.
func TestBoundedPerWindow(t *testing.T) {
	var b bytes.Buffer
	now := time.Unix(1_700_000_000, 0)
	l := upstreamlog.New(slog.New(slog.NewJSONHandler(&b, nil)), func() time.Time { return now })
	r := httptest.NewRequest("GET", "/", nil)
	for range upstreamlog.Max + 5 {
		l.Failed(r, "r", 502, errors.New("reset"))
	}
	if n := len(lines(t, &b)); n != upstreamlog.Max {
		t.Fatalf("%d lines in one window, want %d", n, upstreamlog.Max)
	}
	now = now.Add(upstreamlog.Every)
	l.Failed(r, "r", 502, errors.New("reset"))
	got := lines(t, &b)
	if len(got) != upstreamlog.Max+1 || got[len(got)-1]["suppressed"] != 5.0 {
		t.Fatalf("next window: %d lines, last %v; want suppressed 5", len(got), got[len(got)-1])
	}
}
