package proxy_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/proxy"
	"github.com/sidecache/sidecache/internal/uptransport"
)

// The cached path's upstream calls (the fill's and the bulk call) go over
// internal/lean's pool when it takes them (lean.Client.TakesOut), over
// http.Transport otherwise. These tests hold the two to the same wire and
// the same outcomes: an env with Options.Transport set has no lean pool.

func withTransport(o *proxy.Options, _ *l1.Store) {
	o.Transport = uptransport.New(o.Timeout, 0, 0)
}

// wireLog is every byte an upstream read from the sidecar.
type wireLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *wireLog) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	l.b.Reset()
	return s
}

type teeConn struct {
	net.Conn
	log *wireLog
}

func (c teeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.log.mu.Lock()
	c.log.b.Write(p[:n])
	c.log.mu.Unlock()
	return n, err
}

type teeListener struct {
	net.Listener
	log *wireLog
}

func (l teeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return teeConn{c, l.log}, nil
}

// wireUpstream is newUpstream whose received bytes are logged, and whose
// connections are counted.
func wireUpstream(t *testing.T, h http.HandlerFunc) (*upstream, *wireLog, *atomic.Int64) {
	t.Helper()
	u := &upstream{}
	log := &wireLog{}
	conns := new(atomic.Int64)
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.calls.Add(1)
		h(w, r)
	}))
	u.Listener = teeListener{u.Listener, log}
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u, log, conns
}

// fetchAs sends one request through e's front with host and hdr.
func fetchAs(t *testing.T, e *env, path, host string, hdr http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.front.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if host != "" {
		req.Host = host
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	e.l1.Wait()
	return resp, b
}

var requestID = regexp.MustCompile(`(?m)^X-Request-Id: [^\r]*\r$`)

var tenantRoute = testRoute{Name: "tenant", Pattern: "/tenants/{id}", TTL: time.Minute,
	Key: cachekey.Options{AllQuery: true, Headers: []string{"X-Tenant"}, Host: "canonical.example"}}

// The upstream gets the same request, byte for byte but for the sidecar's
// random X-Request-Id, from a fill and a bulk call over the lean pool as
// over the Transport: the request line, Host (the upstream's), the fields
// the route forwards (keyed ones, the reduced Accept-Encoding, none of the
// client's X-Forwarded-*, Forwarded, Via or request id), the sidecar's own
// X-Forwarded-*, Via and User-Agent, in the same order, and the
// Transport's Accept-Encoding: gzip where the call names no coding.
func TestCachedCallWireMatchesTransport(t *testing.T) {
	up, log, _ := wireUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/users" {
			usersAnswer(func(string) bool { return true })(w, r, bulkIDs(r.URL.RawQuery))
			return
		}
		fmt.Fprint(w, `{"ok":true}`)
	})
	routes := []testRoute{clientRoute, userRoute(1, time.Millisecond), tenantRoute}
	viaLean := newEnv(t, up, routes, func(o *proxy.Options, _ *l1.Store) { o.Via = "sidecache" })
	viaTransport := newEnv(t, up, routes, withTransport, func(o *proxy.Options, _ *l1.Store) { o.Via = "sidecache" })
	// Hostile, short of what makes the request a pass-through (a
	// Cookie on this route).
	hostile := http.Header{
		"Accept-Encoding": {"gzip, br"}, "User-Agent": {"client/1.0"}, "Accept-Language": {"de"},
		"X-Forwarded-For": {"6.6.6.6"}, "X-Forwarded-Host": {"evil.example"}, "X-Forwarded-Proto": {"https"},
		"Forwarded": {"for=6.6.6.6"}, "Via": {"1.1 evil"}, "X-Request-Id": {"client-id"},
		"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		"X-Tenant":    {"t1"}, "If-None-Match": {`"x"`}, "X-Original-Url": {"/admin"},
	}
	for _, tc := range []struct {
		name, path string
		hdr        http.Header
	}{
		{"fill, bare request", "/clients/1", http.Header{}},
		{"fill, hostile fields", "/clients/2", hostile},
		{"fill with a query", "/clients/3?b=2&a=1", http.Header{"Accept-Encoding": {"gzip"}}},
		{"fill, keyed header and canonical host", "/tenants/1", hostile},
		{"bulk call, bare request", "/users/1", http.Header{}},
		{"bulk call, hostile fields", "/users/2", hostile},
		{"bulk call, escaped id", "/users/a%2Cb", http.Header{"User-Agent": {""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var wire [2]string
			for i, e := range []*env{viaLean, viaTransport} {
				log.take()
				resp, _ := fetchAs(t, e, tc.path, "api.example:8080", tc.hdr.Clone())
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d", resp.StatusCode)
				}
				wire[i] = requestID.ReplaceAllString(log.take(), "X-Request-Id: <id>\r")
				bulk := strings.HasPrefix(tc.path, "/users/")
				if strings.Count(wire[i], " HTTP/1.1\r\n") != 1 || !strings.Contains(wire[i], "X-Request-Id: <id>\r\n") ||
					bulk != strings.HasPrefix(wire[i], "GET /users?ids=") {
					t.Fatalf("upstream read %q, want one request with the sidecar's id", wire[i])
				}
			}
			if wire[0] != wire[1] {
				t.Errorf("over lean the upstream read\n%q\nover the Transport\n%q", wire[0], wire[1])
			}
		})
	}
}

// compressed answers as Express's compression() does: in gzip, chunked,
// to a request that accepts it, with Vary: Accept-Encoding either way.
func compressed(w http.ResponseWriter, r *http.Request, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Vary", "Accept-Encoding")
	if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		io.WriteString(w, body)
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	zw := gzip.NewWriter(w)
	io.WriteString(zw, body)
	zw.Close()
}

// A gzip answer reaches the client as it does over the Transport: a bulk
// call's, which the sidecar asked in gzip and splits, decoded into its
// elements; a fill's to a client that named gzip, kept in gzip.
func TestCachedCallGzipMatchesTransport(t *testing.T) {
	var bulkAE sync.Map
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/users" {
			bulkAE.Store(r.Header.Get("Accept-Encoding"), true)
			var elems []string
			for _, id := range bulkIDs(r.URL.RawQuery) {
				elems = append(elems, userJSON(id, r.Header))
			}
			compressed(w, r, "["+strings.Join(elems, ",")+"]")
			return
		}
		compressed(w, r, `{"client":"`+r.URL.Path+`"}`)
	})
	routes := []testRoute{clientRoute, userRoute(2, 20*time.Millisecond)}
	envs := []*env{newEnv(t, up, routes), newEnv(t, up, routes, withTransport)}
	for _, tc := range []struct {
		name, path, ae string
	}{
		{"bulk call", "/users/7", ""},
		{"bulk call, client accepts gzip", "/users/8", "gzip"},
		{"fill", "/clients/7", ""},
		{"fill, client accepts gzip", "/clients/8", "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type answer struct {
				code     int
				ce, body string
			}
			var got [2]answer
			for i, e := range envs {
				hdr := http.Header{}
				if tc.ae != "" {
					hdr.Set("Accept-Encoding", tc.ae)
				}
				for round := range 2 { // the miss, then the hit
					resp, body := fetchAs(t, e, tc.path, "", hdr)
					a := answer{resp.StatusCode, resp.Header.Get("Content-Encoding"), string(body)}
					if round == 0 {
						got[i] = a
					} else if a != got[i] {
						t.Errorf("env %d: hit %+v, miss %+v", i, a, got[i])
					}
				}
			}
			if got[0] != got[1] || got[0].code != http.StatusOK {
				t.Errorf("over lean %+v, over the Transport %+v", got[0], got[1])
			}
			if strings.HasPrefix(tc.path, "/users/") && (got[0].ce != "" || !strings.Contains(got[0].body, `"id":`)) {
				t.Errorf("bulk element %+v, want the decoded element", got[0])
			}
		})
	}
	var aes []string
	bulkAE.Range(func(k, _ any) bool { aes = append(aes, k.(string)); return true })
	if len(aes) != 1 || aes[0] != "gzip" {
		t.Errorf("bulk calls sent Accept-Encoding %q, want only the Transport's gzip", aes)
	}
}

// A connection is reused after a bulk answer read to its end, and never
// after one the sidecar stopped reading (over its bound) or the upstream
// cut: the next bulk call gets its own answer, on a new connection.
func TestBulkCallConnectionReuse(t *testing.T) {
	pad := strings.Repeat("x", 8<<10)
	// Inside the oversized answer, an answer of its own: read as the next
	// answer, were the connection reused, it would hand id 2 a forgery.
	smuggled := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 32\r\n\r\n" + `[{"id":2,"name":"forged ......"}]`
	for _, tc := range []struct {
		name  string
		first func(w http.ResponseWriter)
		code  int // the first id's answer
		conns int64
	}{
		{"whole answer", func(w http.ResponseWriter) { io.WriteString(w, `[{"id":1}]`) }, http.StatusOK, 1},
		{"whole chunked answer", func(w http.ResponseWriter) {
			io.WriteString(w, `[{"id":1}`)
			http.NewResponseController(w).Flush()
			io.WriteString(w, `]`)
		}, http.StatusOK, 1},
		{"failing answer read whole", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "busy")
		}, http.StatusBadGateway, 1},
		// Over the bound, a one-id call's element is too large to keep:
		// the request passes through (GET /users/1, answered 418 here),
		// never 200 with a smuggled answer; the pass-through's
		// connection may be one the next bulk call reuses, so at least
		// 2 (conns negative: at least its opposite).
		{"answer over the bound", func(w http.ResponseWriter) {
			io.WriteString(w, `[{"id":1,"pad":"`+pad+smuggled+`"}]`)
		}, http.StatusTeapot, -2},
		{"chunked answer over the bound", func(w http.ResponseWriter) {
			io.WriteString(w, `[{"id":1,"pad":"`+pad)
			http.NewResponseController(w).Flush()
			io.WriteString(w, smuggled+`"}]`)
		}, http.StatusTeapot, -2},
		{"answer cut by the upstream", func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, `[{"id":1`)
			http.NewResponseController(w).Flush()
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.Close()
			}
		}, http.StatusBadGateway, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, _, conns := wireUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if r.URL.Path != "/users" {
					w.WriteHeader(http.StatusTeapot) // a per-ID request, passed through
					return
				}
				if bulkIDs(r.URL.RawQuery)[0] == "1" {
					tc.first(w)
					return
				}
				usersAnswer(func(string) bool { return true })(w, r, bulkIDs(r.URL.RawQuery))
			})
			e := newEnv(t, up, []testRoute{userRoute(1, time.Millisecond)}, func(o *proxy.Options, _ *l1.Store) { o.MaxBodyBytes = 4 << 10 })
			if r, _ := e.get("/users/1"); r.StatusCode != tc.code {
				t.Fatalf("first id: status %d, want %d", r.StatusCode, tc.code)
			}
			for _, id := range []string{"2", "3"} {
				r, body := e.get("/users/" + id)
				if r.StatusCode != http.StatusOK || !strings.Contains(body, `"id":`+id) || strings.Contains(body, "forged") {
					t.Fatalf("id %s: %d %q", id, r.StatusCode, body)
				}
			}
			if n := conns.Load(); tc.conns >= 0 && n != tc.conns || tc.conns < 0 && n < -tc.conns {
				t.Errorf("%d upstream connections, want %d (negative: at least)", n, tc.conns)
			}
		})
	}
}

// An upstream that closes a kept-alive connection between bulk calls (its
// idle timeout), or reads the next call on it and closes it unanswered,
// fails no client: the call is sent again on a new connection, once.
func TestBulkCallAfterUpstreamClosedConnection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		calls int64 // bulk calls the upstream reads
	}{
		{"closed while idle", 2},
		{"closed unanswered", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hangup atomic.Bool
			up, _, conns := wireUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if hangup.CompareAndSwap(true, false) {
					if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
						c.Close()
					}
					return
				}
				usersAnswer(func(string) bool { return true })(w, r, bulkIDs(r.URL.RawQuery))
			})
			e := newEnv(t, up, []testRoute{userRoute(1, time.Millisecond)})
			if r, _ := e.get("/users/1"); r.StatusCode != http.StatusOK {
				t.Fatalf("first call: %d", r.StatusCode)
			}
			if tc.calls == 2 {
				up.CloseClientConnections()
			} else {
				hangup.Store(true)
			}
			if r, body := e.get("/users/2"); r.StatusCode != http.StatusOK || !strings.Contains(body, `"id":2`) {
				t.Fatalf("after the close: %d %q", r.StatusCode, body)
			}
			if n := up.calls.Load(); n != tc.calls {
				t.Errorf("upstream read %d bulk calls, want %d", n, tc.calls)
			}
			if n := conns.Load(); n != 2 {
				t.Errorf("%d connections, want 2", n)
			}
		})
	}
}

// counters are the requests_total and upstream_requests_total series of
// reg, by labels.
func counters(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if n := mf.GetName(); n != "sidecache_requests_total" && n != "sidecache_upstream_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			out = append(out, fmt.Sprintf("%s{%s} %v", mf.GetName(), strings.Join(ls, ","), m.GetCounter().GetValue()))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// A failing bulk call or fill answers the client, and counts, as it did
// over the Transport: refused, timed out, 5xx, a malformed answer.
func TestCachedCallFailuresMatchTransport(t *testing.T) {
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/clients/")
		if r.URL.Path == "/users" {
			id = bulkIDs(r.URL.RawQuery)[0]
		}
		switch id {
		case "500":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "503":
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case "broken":
			io.WriteString(w, `[{"id":"broken"`)
		case "hang":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "switch":
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")
				c.Close()
			}
		default:
			usersAnswer(func(string) bool { return true })(w, r, []string{id})
		}
	})
	t.Cleanup(func() { close(release) }) // before the upstream closes
	refused := refusedAddr(t)
	routes := []testRoute{clientRoute, userRoute(1, time.Millisecond)}
	short := func(o *proxy.Options, _ *l1.Store) { o.Timeout = 300 * time.Millisecond }
	toRefused := func(o *proxy.Options, _ *l1.Store) { o.Upstream.Host = refused }
	for _, tc := range []struct {
		name  string
		paths []string
		opts  []envOpt
	}{
		{"refused", []string{"/users/1", "/clients/1"}, []envOpt{toRefused}},
		{"timeout", []string{"/users/hang", "/clients/hang"}, []envOpt{short}},
		{"5xx", []string{"/users/500", "/users/503", "/clients/500", "/clients/503"}, nil},
		{"malformed", []string{"/users/broken", "/users/switch", "/clients/switch"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen [2]string
			for i, extra := range [][]envOpt{nil, {withTransport}} {
				e := newEnv(t, up, routes, slices.Concat(tc.opts, extra)...)
				var b strings.Builder
				for _, p := range tc.paths {
					r, body := e.get(p)
					fmt.Fprintf(&b, "%s: %d %q %q\n", p, r.StatusCode, r.Header.Get("Cache-Status"), body)
				}
				b.WriteString(counters(t, e.reg))
				seen[i] = b.String()
			}
			if seen[0] != seen[1] {
				t.Errorf("over lean:\n%s\nover the Transport:\n%s", seen[0], seen[1])
			}
		})
	}
}
