package server_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/config"
	"github.com/sidecache/sidecache/internal/server"
)

// A Kubernetes Secret made from a file (`echo s3cret > token; kubectl
// create secret generic … --from-file=token`) keeps the file's final
// newline, and secretKeyRef hands it to SIDECACHE_ADMIN_TOKEN as it is.
// The token a client presents is read without surrounding blanks (an
// Authorization value cannot carry a newline at all), so the configured
// one must be read the same way: before, every purge and inspect through
// such a token was refused 401, the operator locked out of the purge an
// incident needs, and the start-up said nothing.
func TestAdminTokenFromSecretWithNewline(t *testing.T) {
	o := newOrigin(t)
	yaml := []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  token: "${SIDECACHE_ADMIN_TOKEN:-}"
upstream:
  url: %s
routes:
  - name: client
    path: /clients/{id}
    ttl: 5m
    tags: ["client:{id}"]
`, o.URL))
	env := map[string]string{"SIDECACHE_ADMIN_TOKEN": "s3cret\n"}
	cfg, err := config.ParseWithEnv(yaml, "test.yaml", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	r := runServer(t, cfg, server.Options{Logger: slog.New(slog.DiscardHandler), WatchInterval: -1})
	r.get(t, "/clients/1")
	for _, c := range []struct{ method, path string }{
		{http.MethodPost, "admin:/purge?tag=client:1"},
		{http.MethodGet, "admin:/cache?url=http://clients.svc/clients/1"},
	} {
		code, _, b := r.do(t, c.method, c.path, "Authorization", "Bearer s3cret")
		if code != http.StatusOK {
			t.Errorf("%s %s with the Secret's token: %d %q, want 200", c.method, c.path, code, b)
		}
	}
	// A wrong token is still refused.
	if code, _, _ := r.do(t, http.MethodPost, "admin:/purge?tag=client:1", "Authorization", "Bearer s3cre"); code != http.StatusUnauthorized {
		t.Errorf("POST /purge with a wrong token: %d, want 401", code)
	}
}

// A refused admin call is logged (admin: unauthorized), and a guesser
// cannot flood the process log with them: the line kind is bounded like
// every other (internal/lograte). The clock is frozen, so all the calls
// fall in one window whatever the machine's speed.
func TestRefusedAdminCallsLogBounded(t *testing.T) {
	o := newOrigin(t)
	cfg, err := config.Parse([]byte(fmt.Sprintf(baseConfig, o.URL, "")), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	frozen := time.Now()
	r := runServer(t, cfg, server.Options{
		Logger:        slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		WatchInterval: -1,
		Now:           func() time.Time { return frozen },
	})
	const calls = 60
	start := time.Now()
	for i := range calls {
		if code, _, _ := r.do(t, http.MethodPost, "admin:/purge?tag=client:1", "Authorization", fmt.Sprintf("Bearer guess-%d", i)); code != http.StatusUnauthorized {
			t.Fatalf("a guessed token: %d, want 401", code)
		}
	}
	const line = `msg="admin: unauthorized"`
	tails := int(time.Since(start)/time.Second) + 1
	if n := logs.count(line); n == 0 || n > 10+tails {
		t.Fatalf("%d %s lines for %d refused calls in one window, want 1..%d", n, line, calls, 10+tails)
	}
	if logs.count("guess-") != 0 {
		t.Fatal("the log holds a presented token")
	}
}
