package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// gatedOrigin answers GET /clients/{id} with "client-<id>-v<version>", the
// version read when the request arrives. While a gate is set, the next GET
// reports its arrival on started and holds its (already chosen) answer
// until release is closed: a fill in flight, made to order.
type gatedOrigin struct {
	*httptest.Server
	gets atomic.Int64
	mu   sync.Mutex
	ver  int
	gate *gate
	vary bool // answers say Vary: Accept-Language and name the language
}

type gate struct {
	started chan struct{}
	release chan struct{}
}

func newGatedOrigin(t *testing.T) *gatedOrigin {
	o := &gatedOrigin{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/clients/")
		o.gets.Add(1)
		o.mu.Lock()
		v, g := o.ver, o.gate
		o.gate = nil
		o.mu.Unlock()
		if g != nil {
			close(g.started)
			<-g.release
		}
		w.Header().Set("Content-Type", "text/plain")
		if o.vary {
			w.Header().Set("Vary", "Accept-Language")
			w.Header().Set("Content-Language", r.Header.Get("Accept-Language"))
		}
		fmt.Fprintf(w, "client-%s-v%d", id, v)
	}))
	t.Cleanup(o.Close)
	return o
}

// hold makes the next GET wait for the gate's release.
func (o *gatedOrigin) hold() *gate {
	g := &gate{started: make(chan struct{}), release: make(chan struct{})}
	o.mu.Lock()
	o.gate = g
	o.mu.Unlock()
	return g
}

func (o *gatedOrigin) bump() {
	o.mu.Lock()
	o.ver++
	o.mu.Unlock()
}

// TestPurgeKeyDuringFill: POST /purge?key=K while a fill of K is in
// flight (on the purging replica, or on a peer) must keep that fill's
// pre-purge answer out of every tier: the next reads on both replicas
// fetch again and get the new version. Before the fix the purge only
// deleted K (nothing was stored yet: {"purged":0}) and the fill then
// stored v0 in L1 and L2 for the whole TTL.
func TestPurgeKeyDuringFill(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fillOnB bool // the fill runs on B, the purge is sent to A
	}{
		{"fill and purge on one replica", false},
		{"fill on the peer", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := redistest.Start(t)
			o := newGatedOrigin(t)
			a := startReplica(t, o.URL, l2Block(false, rs.Addr()))
			b := startReplica(t, o.URL, l2Block(false, rs.Addr()))
			filler := a
			if tc.fillOnB {
				filler = b
			}
			const path, key = "/clients/9", "GET clients.svc/clients/9"

			g := o.hold()
			fill := make(chan string, 1)
			go func() {
				_, _, body, err := filler.try(http.MethodGet, path)
				if err != nil {
					body = err.Error()
				}
				fill <- body
			}()
			<-g.started
			o.bump() // the origin changes behind the cache
			peer := metric(t, filler, "sidecache_invalidations_total", `source="peer"`)
			code, _, got := a.do(t, http.MethodPost, "admin:/purge?key="+url.QueryEscape(key), "Authorization", "Bearer secret")
			if code != http.StatusOK {
				t.Fatalf("purge: %d %q", code, got)
			}
			if tc.fillOnB {
				// The purge reaches the filling peer before its fill ends.
				eventually(t, 10*time.Second, "B applies A's purge", func() bool {
					return metric(t, b, "sidecache_invalidations_total", `source="peer"`) > peer
				})
			}
			// A request that arrives after the purge was answered, while
			// the fill is still held: it may join the flight, but must not
			// be given its pre-purge answer.
			late := make(chan string, 1)
			go func() {
				_, _, body, err := filler.try(http.MethodGet, path)
				if err != nil {
					body = err.Error()
				}
				late <- body
			}()
			close(g.release)
			if got := <-fill; got != body("9", 0) {
				t.Fatalf("the fill answered %q, want %q", got, body("9", 0))
			}
			if got := <-late; got != body("9", 1) {
				t.Errorf("a request that came after the purge got %q, want %q", got, body("9", 1))
			}
			if err := filler.srv.FlushL2(t.Context()); err != nil {
				t.Fatal(err)
			}
			for _, r := range []struct {
				name string
				r    *replica
			}{{"A", a}, {"B", b}} {
				if got, cs := r.r.get(t, path); got != body("9", 1) {
					t.Errorf("%s after the purge: %q (Cache-Status %q), want %q", r.name, got, cs, body("9", 1))
				}
			}
			// The fill, and at least one fetch after the purge (the late
			// request's, or the next read's).
			if n := o.gets.Load(); n < 2 {
				t.Errorf("upstream calls: %d, want at least 2", n)
			}
		})
	}
}

// TestPurgeAllDuringFillOnLargeKeyspace: POST /purge?all=1 on A over a
// few hundred thousand keys, while a fill is in flight on B, answers what
// it did (complete, or why not), and afterwards neither replica serves an
// answer fetched before it: not the entries stored before, nor the fill
// B stores after the sweep.
func TestPurgeAllDuringFillOnLargeKeyspace(t *testing.T) {
	rs := redistest.Start(t, "--enable-debug-command", "yes")
	o := newGatedOrigin(t)
	// The sweep takes seconds; the fill held over it must not time out.
	yaml := withUpstreamTimeout(t, fmt.Sprintf(baseConfig, o.URL, l2Block(false, rs.Addr())), "60s")
	a, b := startReplicaYAML(t, yaml), startReplicaYAML(t, yaml)
	for _, id := range []string{"1", "2"} {
		if got, _ := a.get(t, "/clients/"+id); got != body(id, 0) {
			t.Fatalf("A: %q", got)
		}
	}
	if err := a.srv.FlushL2(t.Context()); err != nil {
		t.Fatal(err)
	}
	rc := rawClient(t, rs.Addr())
	if err := rc.Do(t.Context(), "DEBUG", "POPULATE", 300_000, "sidecache:e:junk", 8).Err(); err != nil {
		t.Fatalf("DEBUG POPULATE: %v", err)
	}

	g := o.hold()
	fill := make(chan string, 1)
	go func() {
		_, _, body, err := b.try(http.MethodGet, "/clients/9")
		if err != nil {
			body = err.Error()
		}
		fill <- body
	}()
	<-g.started
	o.bump()
	peer := metric(t, b, "sidecache_invalidations_total", `source="peer"`)
	code, _, got := a.do(t, http.MethodPost, "admin:/purge?all=1", "Authorization", "Bearer secret")
	if code != http.StatusOK {
		t.Fatalf("purge all: %d %q", code, got)
	}
	t.Logf("purge all answered %s", strings.TrimSpace(got))
	var ans struct {
		All      bool   `json:"all"`
		Unlinked int    `json:"unlinked"`
		Complete bool   `json:"complete"`
		Error    string `json:"error"`
	}
	if err := json.Unmarshal([]byte(got), &ans); err != nil {
		t.Fatal(err)
	}
	if !ans.All || ans.Complete == (ans.Error != "") || (ans.Complete && ans.Unlinked < 300_000) {
		t.Errorf("purge all answered %s: want complete with every key removed, or incomplete with an error", got)
	}
	eventually(t, 10*time.Second, "B applies A's purge", func() bool {
		return metric(t, b, "sidecache_invalidations_total", `source="peer"`) > peer
	})
	close(g.release)
	if got := <-fill; got != body("9", 0) {
		t.Fatalf("the fill answered %q", got)
	}
	if err := b.srv.FlushL2(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		name string
		r    *replica
	}{{"A", a}, {"B", b}} {
		for _, id := range []string{"1", "2", "9"} {
			if got, cs := r.r.get(t, "/clients/"+id); got != body(id, 1) {
				t.Errorf("%s /clients/%s after the purge: %q (Cache-Status %q), want %q", r.name, id, got, cs, body(id, 1))
			}
		}
	}
}

// TestPurgeKeyTakesEveryVariant: purging the primary key of a resource
// that varies (Vary: Accept-Language) drops each variant on both
// replicas: the next reads of every variant fetch the new version.
func TestPurgeKeyTakesEveryVariant(t *testing.T) {
	rs := redistest.Start(t)
	o := newGatedOrigin(t)
	o.vary = true
	a := startReplica(t, o.URL, l2Block(false, rs.Addr()))
	b := startReplica(t, o.URL, l2Block(false, rs.Addr()))
	const path = "/clients/4"
	langs := []string{"en", "de"}
	for _, r := range []*replica{a, b} {
		for _, l := range langs {
			eventually(t, 5*time.Second, "a hit of "+l, func() bool {
				_, h, got := r.do(t, http.MethodGet, path, "Accept-Language", l)
				return got == body("4", 0) && strings.Contains(h.Get("Cache-Status"), "; hit")
			})
		}
	}
	o.bump()
	peer := metric(t, b, "sidecache_invalidations_total", `source="peer"`)
	if code, _, got := a.do(t, http.MethodPost, "admin:/purge?key="+url.QueryEscape("GET clients.svc"+path), "Authorization", "Bearer secret"); code != http.StatusOK || strings.TrimSpace(got) != `{"purged":1}` {
		t.Fatalf("purge: %d %q", code, got)
	}
	eventually(t, 10*time.Second, "B applies A's purge", func() bool {
		return metric(t, b, "sidecache_invalidations_total", `source="peer"`) > peer
	})
	for _, r := range []*replica{a, b} {
		for _, l := range langs {
			if _, h, got := r.do(t, http.MethodGet, path, "Accept-Language", l); got != body("4", 1) {
				t.Errorf("%s after the purge: %q (Cache-Status %q), want %q", l, got, h.Get("Cache-Status"), body("4", 1))
			}
		}
	}
}
