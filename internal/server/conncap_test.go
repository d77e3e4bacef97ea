package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// capGuard bounds each wait of these tests on the sidecar: a failure
// guard, never the thing asserted (the asserts are counts and orders).
const capGuard = 15 * time.Second

// rawGet sends GET path on c (keep-alive) and reads its answer's body.
func rawGet(t *testing.T, c net.Conn, br *bufio.Reader, path string) (string, error) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(capGuard))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: svc\r\n\r\n", path); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return string(b), err
}

func dialProxy(t *testing.T, rep *replica) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(rep.proxy, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// TestConnCapClosesAnIdleForNewClient: with server.max_connections N
// and N keep-alive connections idle (each answered once), a new client is
// answered, and one idle connection, only one, is closed to make room
// (NGINX's reusable connections; counted). Before the bound, all
// N+1 stayed open, however many (3,000 idle connections: 47 MB).
func TestConnCapClosesAnIdleForNewClient(t *testing.T) {
	const n = 4
	o := newOrigin(t)
	rep := startReplicaYAML(t, fmt.Sprintf(edgeConfig, fmt.Sprintf("  max_connections: %d", n), o.URL, ""))
	conns := make([]net.Conn, n)
	brs := make([]*bufio.Reader, n)
	for i := range n {
		conns[i], brs[i] = dialProxy(t, rep)
		if b, err := rawGet(t, conns[i], brs[i], fmt.Sprintf("/clients/%d", i+1)); err != nil || b != body(fmt.Sprint(i+1), 0) {
			t.Fatalf("idle client %d: %q, %v", i, b, err)
		}
	}
	c, br := dialProxy(t, rep)
	if b, err := rawGet(t, c, br, "/clients/9"); err != nil || b != body("9", 0) {
		t.Fatalf("new client at the cap: %q, %v; want it answered", b, err)
	}
	// One idle connection, and only one, was closed for it (the oldest
	// idle: connlimit's tests): the others each take another request.
	closed := 0
	for i := range n {
		if b, err := rawGet(t, conns[i], brs[i], fmt.Sprintf("/clients/%d", i+1)); err != nil {
			closed++
		} else if b != body(fmt.Sprint(i+1), 0) {
			t.Errorf("idle client %d after the new one: %q", i, b)
		}
	}
	if closed != 1 {
		t.Errorf("%d of the %d idle connections closed for the new client, want 1", closed, n)
	}
	if got := metric(t, rep, "sidecache_client_connections_reaped_total"); got != 1 {
		t.Errorf("sidecache_client_connections_reaped_total = %v, want 1", got)
	}
	if got := metric(t, rep, "sidecache_client_connections"); got != n {
		t.Errorf("sidecache_client_connections = %v, want %d", got, n)
	}
}

// TestConnCapActiveClientsMakeTheNewOneWait: with N connections each in a
// request the upstream holds, a new client is not served (its connection
// waits in the accept backlog) until one of them ends, and is then; the
// admin listener answers meanwhile. The order is the origin's: the new
// request reaches it only after the test released a held one.
func TestConnCapActiveClientsMakeTheNewOneWait(t *testing.T) {
	const n = 3
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	hold := make(chan struct{})
	arrived := make(chan string, n+1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		note("origin " + r.URL.Path)
		arrived <- r.URL.Path
		if r.URL.Path != "/new" {
			<-hold
		}
		fmt.Fprint(w, "ok "+r.URL.Path)
	}))
	defer up.Close()
	defer func() {
		select {
		case <-hold:
		default:
			close(hold)
		}
	}()
	rep := startReplicaYAML(t, fmt.Sprintf(edgeConfig, fmt.Sprintf("  max_connections: %d", n), up.URL, ""))
	conns := make([]net.Conn, n)
	brs := make([]*bufio.Reader, n)
	for i := range n {
		conns[i], brs[i] = dialProxy(t, rep)
		_ = conns[i].SetDeadline(time.Now().Add(capGuard))
		fmt.Fprintf(conns[i], "GET /held/%d HTTP/1.1\r\nHost: svc\r\n\r\n", i)
	}
	for range n {
		select {
		case <-arrived:
		case <-time.After(capGuard):
			t.Fatal("the held requests did not all reach the origin")
		}
	}
	// The listener is at its cap with none idle: it waits (the admin
	// listener, outside the cap, answers this).
	for deadline := time.Now().Add(capGuard); metric(t, rep, "sidecache_client_connection_waits_total") < 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("sidecache_client_connection_waits_total stayed 0 with every slot in a request")
		}
	}
	if code, _, _ := rep.do(t, http.MethodGet, "admin:/healthz"); code != http.StatusOK {
		t.Errorf("admin /healthz at the cap: %d, want 200", code)
	}
	c, br := dialProxy(t, rep) // the kernel completes it: it waits in the backlog
	_ = c.SetDeadline(time.Now().Add(capGuard))
	fmt.Fprint(c, "GET /new HTTP/1.1\r\nHost: svc\r\n\r\n")
	// Its request is read only once a slot is free: hold one and see the
	// admin answer again, then release the held requests.
	if got := metric(t, rep, "sidecache_client_connections"); got != n {
		t.Errorf("sidecache_client_connections at the cap = %v, want %d", got, n)
	}
	note("release")
	close(hold)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("new client: %v; want it answered once a slot was free", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok /new" {
		t.Errorf("new client: %q", b)
	}
	for i := range n {
		if _, err := http.ReadResponse(brs[i], nil); err != nil {
			t.Errorf("held client %d: %v", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if i, j := indexOfStr(order, "release"), indexOfStr(order, "origin /new"); i < 0 || j < i {
		t.Errorf("order %q: the new request reached the origin before a slot was free", order)
	}
}

func indexOfStr(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// TestConnCapReloadsInPlace: server.max_connections is a slot count, so
// a reload applies it without a restart: raised, a client the old bound
// kept waiting gets in at once.
func TestConnCapReloadsInPlace(t *testing.T) {
	hold := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/held" {
			<-hold
		}
		fmt.Fprint(w, "ok")
	}))
	defer up.Close()
	defer close(hold) // before up.Close, which waits for the held request
	p := reloadParams{token: "t", level: "info", upstream: up.URL, timeout: "20s", ttl: "5m"}
	fc := startFromFileYAML(t, p.yaml()+"server:\n  max_connections: 1\n")
	if got := metric(t, fc.replica, "sidecache_client_connections_max"); got != 1 {
		t.Fatalf("sidecache_client_connections_max = %v, want 1", got)
	}
	c1, _ := dialProxy(t, fc.replica)
	fmt.Fprint(c1, "GET /held HTTP/1.1\r\nHost: svc\r\n\r\n") // the one slot, held
	for deadline := time.Now().Add(capGuard); metric(t, fc.replica, "sidecache_client_connection_waits_total") < 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the listener never waited with its one slot in a request")
		}
	}
	c2, br2 := dialProxy(t, fc.replica)
	_ = c2.SetDeadline(time.Now().Add(capGuard))
	fmt.Fprint(c2, "GET /other HTTP/1.1\r\nHost: svc\r\n\r\n")
	if err := fc.rewrite(t, p.yaml()+"server:\n  max_connections: 2\n"); err != nil {
		t.Fatal(err)
	}
	wantReloads(t, fc, "1", "0", "0")
	resp, err := http.ReadResponse(br2, nil)
	if err != nil {
		t.Fatalf("waiting client after the bound was raised: %v", err)
	}
	resp.Body.Close()
	if got := metric(t, fc.replica, "sidecache_client_connections_max"); got != 2 {
		t.Errorf("sidecache_client_connections_max = %v, want 2", got)
	}
}
