package server_test

import (
	"testing"
)

// TestAccessLogLineHasEveryField checks one JSON line per request, with the
// fields the middleware knows itself: method, path, status, the
// Cache-Status result and detail of this cache's member, bytes, and the
// duration; route and upstream are present (the proxy fills them).
func TestAccessLogLineHasEveryField(t *testing.T) {
	o := newOrigin(t)
	fc := startFromFile(t, reloadParams{token: "t", level: "info", access: true, upstream: o.URL, timeout: "2s", ttl: "5m"})
	b1, _ := fc.get(t, "/clients/7?x=1")
	b2, _ := fc.get(t, "/clients/7?x=1")
	fc.do(t, "GET", "/elsewhere")

	lines := fc.access.lines()
	if len(lines) != 3 {
		t.Fatalf("%d access lines, want 3: %v", len(lines), lines)
	}
	want := []map[string]any{
		{"msg": "access", "level": "INFO", "method": "GET", "path": "/clients/7", "status": 200.0,
			"cache": "miss", "cache_detail": "stored", "bytes": float64(len(b1))},
		{"msg": "access", "level": "INFO", "method": "GET", "path": "/clients/7", "status": 200.0,
			"cache": "hit", "cache_detail": "l1", "bytes": float64(len(b2))},
		{"msg": "access", "method": "GET", "path": "/elsewhere", "status": 200.0, "cache": "pass", "route": "_pass"},
	}
	for i, w := range want {
		for k, v := range w {
			if lines[i][k] != v {
				t.Errorf("line %d: %s = %#v, want %#v (line %v)", i+1, k, lines[i][k], v, lines[i])
			}
		}
		for _, k := range []string{"time", "route", "duration", "upstream"} {
			if _, ok := lines[i][k]; !ok {
				t.Errorf("line %d has no %q: %v", i+1, k, lines[i])
			}
		}
		if d, _ := lines[i]["duration"].(float64); d <= 0 {
			t.Errorf("line %d: duration = %v, want > 0 (seconds)", i+1, lines[i]["duration"])
		}
	}
}

// TestAccessLogOffWritesNothing: log.access defaults to off.
func TestAccessLogOffWritesNothing(t *testing.T) {
	o := newOrigin(t)
	fc := startFromFile(t, reloadParams{token: "t", level: "info", upstream: o.URL, timeout: "2s", ttl: "5m"})
	fc.get(t, "/clients/7")
	if l := fc.access.lines(); len(l) != 0 {
		t.Errorf("access log off wrote %v", l)
	}
}
