package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sidecache/sidecache/internal/config"
	"github.com/sidecache/sidecache/internal/redistest"
	"github.com/sidecache/sidecache/internal/server"
)

// wOrigin serves /w/{id} and /wsum/{id} (a summary of the same record):
// "<path>-v<version>"; a PATCH of /w/{id} bumps the record's version.
func wOrigin(t *testing.T) *httptest.Server {
	var (
		mu  sync.Mutex
		ver = map[string]int{}
	)
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		mu.Lock()
		if r.Method == http.MethodPatch {
			ver[id]++
		}
		v := ver[id]
		mu.Unlock()
		fmt.Fprintf(w, "%s-v%d", r.URL.Path, v)
	}))
	t.Cleanup(o.Close)
	return o
}

// wConfig is the prober's layout: reads of /w and /wsum tagged w:{id},
// the write route that drops w:{id}, and routes after it.
const wConfig = `
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  token: tok
upstream:
  url: %s
  timeout: 2s
cache:
  l1:
    max_bytes: 16MiB
  l2:
    redis:
      addrs: [%s]
      timeout: 500ms
routes:
  - name: w
    path: /w/{id:[1-9][0-9]*}
    ttl: 5m
    tags: ["w:{id}"]
  - name: wsum
    path: /wsum/{id:[1-9][0-9]*}
    ttl: 5m
    tags: ["w:{id}"]
  - name: w-write
    methods: [PATCH, POST]
    path: /w/{id:[1-9][0-9]*}
    invalidate: ["w:{id}"]
  - name: tail
    path: /tail/{id}
    ttl: 5m
`

// wFile is a sidecar run from a config file on disk, on a Redis of its
// own, with no watcher goroutine: the test drives the polls.
type wFile struct {
	*replica
	path, full, redis, upstream string
}

func startW(t *testing.T) *wFile {
	t.Helper()
	o, rs := wOrigin(t), redistest.Start(t)
	f := &wFile{path: filepath.Join(t.TempDir(), "c.yaml"), redis: rs.Addr(), upstream: o.URL}
	f.full = fmt.Sprintf(wConfig, o.URL, rs.Addr())
	f.write(t, f.full)
	f.replica = f.start(t)
	return f
}

// start runs a sidecar (another replica when one runs) from the file.
func (f *wFile) start(t *testing.T) *replica {
	t.Helper()
	cfg, err := config.Load(f.path)
	if err != nil {
		t.Fatal(err)
	}
	return runServer(t, cfg, server.Options{ConfigPath: f.path, WatchInterval: -1, Logger: slog.New(slog.DiscardHandler)})
}

func (f *wFile) write(t *testing.T, content string) {
	t.Helper()
	if err := os.WriteFile(f.path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// routes are the names and invalidate templates GET /routes shows.
func (f *wFile) routes(t *testing.T) string {
	t.Helper()
	_, _, b := f.do(t, http.MethodGet, "admin:/routes")
	var rs []struct {
		Name       string   `json:"name"`
		Invalidate []string `json:"invalidate"`
	}
	if err := json.Unmarshal([]byte(b), &rs); err != nil {
		t.Fatalf("GET /routes: %v: %s", err, b)
	}
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprint(r.Name, r.Invalidate))
	}
	return strings.Join(out, " ")
}

// half is content cut just before the write route's invalidate line, as
// `cat > file` leaves it between two writes: valid YAML, rule and routes
// missing.
func half(t *testing.T, content string) string {
	t.Helper()
	i := strings.Index(content, "  - name: w-write")
	j := strings.Index(content[i:], "invalidate:")
	if i < 0 || j < 0 {
		t.Fatal("wConfig lost its write route")
	}
	return content[:i+j]
}

func (f *wFile) wantGet(t *testing.T, r *replica, path, body, status string) {
	t.Helper()
	b, cs := r.get(t, path)
	if b != body || !strings.Contains(cs, status) {
		t.Fatalf("GET %s: %q, Cache-Status %q; want %q, %q", path, b, cs, body, status)
	}
}

// TestWatchAppliesOnlySettledContent: a file caught half-written by a poll
// is never applied; the whole file is, once two polls read it the same.
func TestWatchAppliesOnlySettledContent(t *testing.T) {
	f := startW(t)
	before := f.routes(t)
	next := f.full + "  - name: added\n    path: /added/{id}\n    ttl: 1m\n"

	f.write(t, half(t, next))
	if f.srv.PollConfig() {
		t.Error("the first poll of a half-written file reloaded")
	}
	wantReloads(t, &fileConfig{replica: f.replica}, "0", "0", "0")
	if got := f.routes(t); got != before {
		t.Fatalf("routes after a poll of a half-written file:\n %s\nwant\n %s", got, before)
	}

	f.write(t, next) // the writer's second step
	if f.srv.PollConfig() {
		t.Error("the first poll of the whole file reloaded: not yet settled")
	}
	if !f.srv.PollConfig() {
		t.Fatal("the second poll of the whole file did not reload")
	}
	if f.srv.PollConfig() {
		t.Error("a poll of the applied file reloaded again")
	}
	wantReloads(t, &fileConfig{replica: f.replica}, "1", "0", "0")
	if got, want := f.routes(t), before+" added[]"; got != want {
		t.Fatalf("routes after the whole file:\n %s\nwant\n %s", got, want)
	}
}

// TestWatchAfterReloadAppliesOnlySettledContent: a SIGHUP between two
// polls is a look at the file too. A poll catches a write half done, the
// write ends and a SIGHUP applies the whole file; the file is then written
// again (the same content, `cat > file` cutting it at the same byte) and
// the next poll catches it at that cut. The watcher remembered the half
// file from the poll before the SIGHUP, took one poll of it for two, and
// applied it: the write route lost its invalidate rule.
func TestWatchAfterReloadAppliesOnlySettledContent(t *testing.T) {
	f := startW(t)
	next := f.full + "  - name: added\n    path: /added/{id}\n    ttl: 1m\n"

	f.write(t, half(t, next))
	if f.srv.PollConfig() {
		t.Fatal("the first poll of a half-written file reloaded")
	}
	f.write(t, next)
	if err := f.srv.Reload(); err != nil { // SIGHUP
		t.Fatal(err)
	}
	applied := f.routes(t)
	if !strings.Contains(applied, "w-write[w:{id}]") || !strings.Contains(applied, "added[]") {
		t.Fatalf("routes after the SIGHUP: %s", applied)
	}

	f.write(t, half(t, next)) // written again, caught at the same cut
	if f.srv.PollConfig() {
		t.Error("one poll of a half-written file after a SIGHUP reloaded")
	}
	if got := f.routes(t); got != applied {
		t.Fatalf("routes after a poll of a half-written file:\n %s\nwant\n %s", got, applied)
	}
	f.write(t, next) // the writer's second step
	if f.srv.PollConfig() || f.srv.PollConfig() {
		t.Error("a poll of the applied file reloaded again")
	}
	wantReloads(t, &fileConfig{replica: f.replica}, "1", "0", "0")
}

// TestReloadRestoringInvalidateDropsWhatItCovers: a file that drops the
// write route's invalidate is applied (SIGHUP, or a writer that paused for
// a whole poll), a write is answered meanwhile, then the whole file comes
// back: what the restored rule covers must not stay stale (the write
// dropped only /w/7's own URI, not /wsum/7).
func TestReloadRestoringInvalidateDropsWhatItCovers(t *testing.T) {
	f := startW(t)
	f.wantGet(t, f.replica, "/wsum/7", "/wsum/7-v0", "stored")
	f.wantGet(t, f.replica, "/wsum/7", "/wsum/7-v0", "hit")

	f.write(t, half(t, f.full))
	if err := f.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := f.do(t, http.MethodPatch, "/w/7"); code != http.StatusOK {
		t.Fatalf("PATCH /w/7: %d", code)
	}
	f.write(t, f.full)
	if err := f.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	f.wantGet(t, f.replica, "/wsum/7", "/wsum/7-v1", "fwd=miss")
}

// TestReloadRenamedRouteServesNoOldEntry: after a route is renamed by a
// reload, no entry stored under its old name is served (here or from L2
// by a replica started on the new file), and a purge by its new name drops
// what it serves.
func TestReloadRenamedRouteServesNoOldEntry(t *testing.T) {
	f := startW(t)
	f.wantGet(t, f.replica, "/wsum/8", "/wsum/8-v0", "stored")
	f.wantGet(t, f.replica, "/wsum/8", "/wsum/8-v0", "hit")

	renamed := strings.Replace(f.full, "- name: wsum\n", "- name: wsummary\n", 1)
	f.write(t, renamed)
	if err := f.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.routes(t), "wsummary[]") {
		t.Fatalf("routes after the rename: %s", f.routes(t))
	}

	// A replica started on the new file reads L2 first.
	b := f.start(t)
	f.wantGet(t, b, "/wsum/8", "/wsum/8-v0", "fwd=miss")
	if err := b.srv.FlushL2(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.wantGet(t, f.replica, "/wsum/8", "/wsum/8-v0", "hit") // B's fill, from L2
	if code, _, body := f.do(t, http.MethodPost, "admin:/purge?route=wsummary", "Authorization", "Bearer tok"); code != http.StatusOK {
		t.Fatalf("purge?route=wsummary: %d %s", code, body)
	}
	f.wantGet(t, f.replica, "/wsum/8", "/wsum/8-v0", "fwd=miss")
}

// TestReloadRenamedTagsServeNoOldEntry: a reload renames the tag template
// of the read routes and the write route's invalidate template alike; a
// write then drops the new tag, which no entry stored before the reload
// carries: none of those may be served.
func TestReloadRenamedTagsServeNoOldEntry(t *testing.T) {
	f := startW(t)
	f.wantGet(t, f.replica, "/w/9", "/w/9-v0", "stored")
	f.wantGet(t, f.replica, "/wsum/9", "/wsum/9-v0", "stored")

	f.write(t, strings.ReplaceAll(f.full, `"w:{id}"`, `"item:{id}"`))
	if err := f.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	b := f.start(t)
	if code, _, _ := f.do(t, http.MethodPatch, "/w/9"); code != http.StatusOK {
		t.Fatalf("PATCH /w/9: %d", code)
	}
	f.wantGet(t, f.replica, "/wsum/9", "/wsum/9-v1", "fwd=miss")
	f.wantGet(t, b, "/wsum/9", "/wsum/9-v1", "")
	f.wantGet(t, b, "/w/9", "/w/9-v1", "")
}

// TestReloadUnshadowedInvalidateDropsWhatItCovers: a reload puts a route
// before the write route that takes its PATCHes (first match wins), so a
// write answered meanwhile drops no tag though the rule stays in the file;
// once the file is restored the rule reaches /wsum/{id} again, and what it
// covers must not stay stale, here or in L2 (the prober's five steps; the
// restore applied by SIGHUP, then by the watcher).
func TestReloadUnshadowedInvalidateDropsWhatItCovers(t *testing.T) {
	shadow := "  - {name: shadow, methods: [PATCH], path: \"/w/{id:[1-9][0-9]*}\", ttl: 5m}\n"
	for _, watched := range []bool{false, true} {
		t.Run(fmt.Sprint("watched=", watched), func(t *testing.T) {
			f := startW(t)
			f.wantGet(t, f.replica, "/wsum/7", "/wsum/7-v0", "stored")

			f.write(t, strings.Replace(f.full, "  - name: w-write\n", shadow+"  - name: w-write\n", 1))
			if err := f.srv.Reload(); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(f.routes(t), "shadow[] w-write") {
				t.Fatalf("routes with the shadowing route: %s", f.routes(t))
			}
			if code, _, _ := f.do(t, http.MethodPatch, "/w/7"); code != http.StatusOK {
				t.Fatalf("PATCH /w/7: %d", code)
			}

			f.write(t, f.full)
			if watched {
				// Settled by two polls: the SIGHUP's read is the
				// watcher's last look at the file.
				if !f.srv.PollConfig() && !f.srv.PollConfig() {
					t.Fatal("two polls did not apply the restored file")
				}
			} else if err := f.srv.Reload(); err != nil {
				t.Fatal(err)
			}
			f.wantGet(t, f.replica, "/wsum/7", "/wsum/7-v1", "fwd=miss")
			if err := f.srv.FlushL2(context.Background()); err != nil {
				t.Fatal(err)
			}
			b := f.start(t) // reads L2 first
			f.wantGet(t, b, "/wsum/7", "/wsum/7-v1", "")
		})
	}
}
