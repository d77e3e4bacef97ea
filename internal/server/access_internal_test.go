package server

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/accesslog"
	"github.com/sidecache/sidecache/internal/config"
)

// TestAccessLogReadsWhatTheHandlerRecorded: the route and the upstream time
// come from the Record the wrapped handler fills in, and the Cache-Status
// result and detail from this cache's member, the last one, not from a
// cache nearer the origin.
func TestAccessLogReadsWhatTheHandlerRecorded(t *testing.T) {
	var buf bytes.Buffer
	h := accessLog(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rec := accesslog.FromContext(r.Context()); rec != nil {
			rec.Route, rec.Upstream, rec.UpstreamRequestID = "client", 1500*time.Microsecond, "up-1"
		}
		w.Header().Set("Cache-Status", `origin-cdn; hit; detail=edge, sidecache; fwd=stale; fwd-status=503; collapsed; detail="l2"`)
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "hello")
	}), func() config.Log { return config.Log{Access: true} }, NewLogger(&buf, "json", slog.LevelInfo))
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/clients/9?a=b", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Request-Id", "client-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
	}
	want := map[string]any{
		"msg": "access", "method": "POST", "path": "/clients/9", "route": "client", "status": 202.0,
		"cache": "stale", "cache_detail": "collapsed,l2", "upstream": 0.0015, "query": "a=b", "bytes": 5.0,
		// The client's id and the one sent upstream, which differ on the
		// cached path (issue 20 item 7b).
		"request_id": "client-1", "upstream_request_id": "up-1",
	}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s = %#v, want %#v (line %v)", k, line[k], v, line)
		}
	}
}

func TestCacheStatusMember(t *testing.T) {
	tests := []struct {
		values         []string
		result, detail string
	}{
		{nil, "", ""},
		{[]string{"sidecache; hit; ttl=42; detail=l1"}, "hit", "l1"},
		{[]string{"sidecache; fwd=miss; stored"}, "miss", "stored"},
		{[]string{"sidecache; fwd=bypass"}, "bypass", ""},
		{[]string{"other; hit", "sidecache; fwd=uri-miss"}, "uri-miss", ""},
		{[]string{"sidecache; hit, other; fwd=miss"}, "", ""}, // ours is not last: a cache in front wrote after us
	}
	for _, tt := range tests {
		r, d := cacheStatus(tt.values)
		if r != tt.result || d != tt.detail {
			t.Errorf("cacheStatus(%q) = %q, %q; want %q, %q", tt.values, r, d, tt.result, tt.detail)
		}
	}
}
