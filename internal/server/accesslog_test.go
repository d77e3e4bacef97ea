package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/config"
	"github.com/sidecache/sidecache/internal/server"
)

// accessReplica runs a sidecar on yaml with its access log in a buffer.
func accessReplica(t *testing.T, yaml string) (*replica, *syncBuffer) {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	buf := &syncBuffer{}
	r := runServer(t, cfg, server.Options{
		Logger: slog.New(slog.DiscardHandler), WatchInterval: -1,
		AccessLog: server.NewLogger(buf, "json", slog.LevelInfo),
	})
	return r, buf
}

const accessYAML = `
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstream: {url: %s, timeout: 10s}
log:
  access: true
  redact_query: [token]
cache: {l1: {max_bytes: 1MiB}}
routes:
  - name: client
    path: /clients/{id}
    ttl: 1m
  - name: user
    path: /users/{id}
    ttl: 1m
    batch: {path: /users, param: ids, id_field: id}
`

// TestAccessLogIncidentFields (issue 22, item 4): the line keeps the query
// (with the configured parameters redacted) and names the client address,
// host, user agent and request id; durations are seconds.
func TestAccessLogIncidentFields(t *testing.T) {
	o := newOrigin(t)
	r, buf := accessReplica(t, fmt.Sprintf(accessYAML, o.URL))
	r.do(t, http.MethodGet, "/clients/1?x=1&token=s3cret", "User-Agent", "probe/1.0", "X-Request-ID", "req-7")
	lines := buf.lines()
	if len(lines) != 1 {
		t.Fatalf("%d access lines: %v", len(lines), lines)
	}
	l := lines[0]
	for k, v := range map[string]any{
		"query": "x=1&token=REDACTED", "host": "clients.svc", "client": "127.0.0.1",
		"user_agent": "probe/1.0", "request_id": "req-7", "route": "client", "cache": "miss",
	} {
		if l[k] != v {
			t.Errorf("%s = %#v, want %#v (line %v)", k, l[k], v, l)
		}
	}
	if strings.Contains(fmt.Sprint(l), "s3cret") {
		t.Errorf("a redacted value reached the log: %v", l)
	}
	// Seconds as a decimal: a request that took under the test's timeout
	// is below it when read as seconds, never when read as nanoseconds.
	for _, k := range []string{"duration", "upstream"} {
		d, ok := l[k].(float64)
		if !ok || d <= 0 || d >= client.Timeout.Seconds() {
			t.Errorf("%s = %#v, want seconds in (0, %v)", k, l[k], client.Timeout.Seconds())
		}
	}
}

// TestAccessLogClientGone499: a client that goes away before the answer is
// logged 499, as NGINX does, not 200 with no bytes.
func TestAccessLogClientGone499(t *testing.T) {
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-release
	}))
	t.Cleanup(o.Close)
	t.Cleanup(func() { close(release) })
	r, buf := accessReplica(t, fmt.Sprintf(accessYAML, o.URL))

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.proxy+"/clients/1", nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-arrived
	cancel()
	<-done
	eventually(t, 5*time.Second, "the access line of the abandoned request", func() bool { return len(buf.lines()) == 1 })
	if l := buf.lines()[0]; l["status"] != float64(499) || l["bytes"] != float64(0) {
		t.Errorf("abandoned request logged %v, want status 499 and no bytes", l)
	}
}

// TestAccessLogBatchedUpstreamShare: a request answered by a bulk call
// carries its share of the call's time, not 0 as if it had been a hit.
func TestAccessLogBatchedUpstreamShare(t *testing.T) {
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `[{"id":%s}]`, r.URL.Query().Get("ids"))
	}))
	t.Cleanup(o.Close)
	r, buf := accessReplica(t, fmt.Sprintf(accessYAML, o.URL))
	if code, _, b := r.do(t, http.MethodGet, "/users/5"); code != http.StatusOK {
		t.Fatalf("GET /users/5: %d %q", code, b)
	}
	l := buf.lines()[0]
	if l["route"] != "user" || l["cache"] != "miss" {
		t.Fatalf("line %v, want route user, miss", l)
	}
	if d, _ := l["upstream"].(float64); d <= 0 {
		t.Errorf("batched request: upstream = %v, want its share of the bulk call (> 0)", l["upstream"])
	}
}
