package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The send budget (server.max_pending_send_bytes, internal/sendbudget):
// clients that ask for large answers and never read them hold those
// answers' bytes in the sidecar for as long as their writes wait. Before
// the budget nothing but max_connections × max_body_bytes bounded them
// (100 such clients of different 6 MiB answers: 822 MiB RSS).

// sendSize is each large answer's size: 2 MiB more than the most a
// socket's send buffer grows to (net.ipv4.tcp_wmem's maximum, 4 MiB by
// default: a client that reads nothing, its receive buffer set to 4 KiB,
// still had 2.8 MB of an answer taken by the kernel on loopback), so the
// write waits with the rest of the body in hand.
var sendSize = func() int {
	most := 4 << 20
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 3 {
			if n, err := strconv.Atoi(f[2]); err == nil {
				most = n
			}
		}
	}
	return most + 2<<20
}()

// sendBudgetConfig has a cached route of large answers, a batch route
// of large elements and a split route of lists of them, and a send
// budget of one and a half answers: one waiting write fits, two do not.
const sendBudgetConfig = `
listen: 127.0.0.1:0
server:
  max_pending_send_bytes: %[1]d
admin:
  listen: 127.0.0.1:0
upstream:
  url: %[2]s
  timeout: 5s
cache:
  max_body_bytes: %[3]d
  l1:
    max_bytes: %[4]d
routes:
  - name: big
    path: /big/{id:[1-9][0-9]*}
    ttl: 5m
  - name: user
    path: /users/{id:[1-9][0-9]*}
    ttl: 5m
    batch:
      path: /users
      param: ids
      max_size: 10
      max_wait: 1ms
      id_field: id
  - name: users
    path: /users
    split:
      param: ids
      route: user
`

// bigOrigin answers /big/<id> with sendSize bytes of its own for each id,
// and the bulk /users?ids= with one element of about sendSize bytes per id.
func bigOrigin(t *testing.T) *httptest.Server {
	t.Helper()
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, ok := strings.CutPrefix(r.URL.Path, "/big/"); ok {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(bigBody(id))
			return
		}
		if r.URL.Path == "/users" {
			w.Header().Set("Content-Type", "application/json")
			var b bytes.Buffer
			b.WriteByte('[')
			for i, id := range strings.Split(r.URL.Query().Get("ids"), ",") {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"id":%s,"pad":%q}`, id, bigBody(id))
			}
			b.WriteByte(']')
			_, _ = w.Write(b.Bytes())
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(o.Close)
	return o
}

// budgetYAML is sendBudgetConfig with budget, in front of origin.
func budgetYAML(budget int, origin string) string {
	return fmt.Sprintf(sendBudgetConfig, budget, origin, 2*sendSize, 16*sendSize)
}

func bigBody(id string) []byte {
	return bytes.Repeat([]byte(id+"."), sendSize/(len(id)+1)+1)[:sendSize]
}

// nonReader is a client that sends GET path and reads nothing: its
// receive buffer is 4 KiB, so the sidecar's write of a large answer to
// it waits at once.
type nonReader struct {
	c    net.Conn
	path string
}

func dialNonReader(t *testing.T, rep *replica, path string) *nonReader {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", strings.TrimPrefix(rep.proxy, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: clients.svc\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	return &nonReader{c: c, path: path}
}

// readAll reads the client's answer at last: its body, and whether it
// came whole (as long as its Content-Length, the connection not cut).
func (n *nonReader) readAll(t *testing.T) (body []byte, whole bool) {
	t.Helper()
	_ = n.c.SetDeadline(time.Now().Add(capGuard))
	resp, err := http.ReadResponse(bufio.NewReader(n.c), nil)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("%s: status %d", n.path, resp.StatusCode)
	}
	return body, err == nil && strconv.Itoa(len(body)) == resp.Header.Get("Content-Length")
}

// pendingSends is how many writes wait now and how many were cut by the
// budget so far.
func pendingSends(t *testing.T, rep *replica) (waiting, cut float64) {
	t.Helper()
	return metric(t, rep, "sidecache_client_pending_sends"), edgeRefused(t, rep)["send-budget"]
}

// TestSendBudgetCutsNonReadersOldestFirst: with a budget of one and a half
// answers, clients that ask for different large answers and never read
// them are cut as each new one's write begins to wait, the one waiting
// longest first, on every path that writes an answer the sidecar holds
// whole (a fill, an L1 hit, a batch element, a split list): after n of
// them, n-1 are cut (counted under send-budget), the last one still gets
// its whole answer once it reads, and a client that reads meanwhile gets
// whole, right answers. Before the budget, all n waited, holding n
// answers, until write_timeout.
func TestSendBudgetCutsNonReadersOldestFirst(t *testing.T) {
	const n = 4
	budget := sendSize + sendSize/2
	for _, tc := range []struct {
		name string
		warm bool // the answers are read once first (L1 hits)
		path func(i int) string
	}{
		{"fill", false, func(i int) string { return fmt.Sprintf("/big/%d", i) }},
		{"l1-hit", true, func(i int) string { return fmt.Sprintf("/big/%d", i) }},
		{"batch-element", false, func(i int) string { return fmt.Sprintf("/users/%d", i) }},
		{"split-list", true, func(i int) string { return fmt.Sprintf("/users?ids=%d", i) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := startReplicaYAML(t, budgetYAML(budget, bigOrigin(t).URL))
			want := map[string]string{}
			for i := 1; i <= n+1; i++ {
				p := tc.path(i)
				if tc.warm {
					code, _, b := rep.do(t, http.MethodGet, p)
					if code != http.StatusOK || len(b) < sendSize {
						t.Fatalf("warm %s: %d, %d bytes", p, code, len(b))
					}
					want[p] = b
				}
			}
			var nrs []*nonReader
			for i := 1; i <= n; i++ {
				nrs = append(nrs, dialNonReader(t, rep, tc.path(i)))
				eventually(t, capGuard, fmt.Sprintf("non-reader %d's write waiting or cut", i), func() bool {
					w, c := pendingSends(t, rep)
					return w+c == float64(i)
				})
			}
			waiting, cut := pendingSends(t, rep)
			held := metric(t, rep, "sidecache_client_pending_send_bytes")
			if cut != n-1 || waiting != 1 || held > float64(budget) {
				t.Errorf("after %d non-readers of different answers: %v cut (send-budget), %v waiting holding %v bytes; want %d cut, 1 waiting, at most max_pending_send_bytes %d held",
					n, cut, waiting, held, n-1, budget)
			}
			// A client that reads meanwhile is answered whole and right.
			// Its own write may wait too (its answer is more than the
			// kernel takes at once, unless the client drains it as fast
			// as it is written): then it cuts the last non-reader's, the
			// one longest without progress.
			p := tc.path(n + 1)
			code, h, b := rep.do(t, http.MethodGet, p)
			if code != http.StatusOK || (tc.warm && b != want[p]) || len(b) < sendSize {
				t.Errorf("reading client, %s: %d, %d bytes (Cache-Status %q)", p, code, len(b), h.Get("Cache-Status"))
			}
			_, cut = pendingSends(t, rep)
			if cut != n-1 && cut != n {
				t.Errorf("after a reading client's answer: %v cut, want %d (or %d, the last non-reader's cut for it)", cut, n-1, n)
			}
			// The oldest n-1 were cut: their answers end short. The last
			// one reads its answer whole, unless the reader's cut it.
			for i, nr := range nrs {
				body, whole := nr.readAll(t)
				if i < n-1 {
					if whole {
						t.Errorf("non-reader %d (%s) read its whole answer, %d bytes: not cut", i+1, nr.path, len(body))
					}
					continue
				}
				if whole != (cut == n-1) {
					t.Errorf("the last non-reader (%s) got %d bytes, whole %v, with %v cut", nr.path, len(body), whole, cut)
				}
				if _, _, b := rep.do(t, http.MethodGet, nr.path); whole && string(body) != b {
					t.Errorf("the last non-reader (%s) read %d bytes, not the %d a reading client gets", nr.path, len(body), len(b))
				}
			}
			eventually(t, capGuard, "no write left waiting", func() bool {
				return metric(t, rep, "sidecache_client_pending_sends") == 0 && metric(t, rep, "sidecache_client_pending_send_bytes") == 0
			})
		})
	}
}

// TestSendBudgetCountsASharedBodyOnce: clients that never read one and
// the same cached answer hold one body between them, so they count once
// and none is cut, however many there are (the budget holds one and a
// half answers; here four wait).
func TestSendBudgetCountsASharedBodyOnce(t *testing.T) {
	const n = 4
	budget := sendSize + sendSize/2
	rep := startReplicaYAML(t, budgetYAML(budget, bigOrigin(t).URL))
	rep.get(t, "/big/7")
	var nrs []*nonReader
	for i := 1; i <= n; i++ {
		nrs = append(nrs, dialNonReader(t, rep, "/big/7"))
		eventually(t, capGuard, fmt.Sprintf("non-reader %d's write waiting or cut", i), func() bool {
			w, c := pendingSends(t, rep)
			return w+c == float64(i)
		})
	}
	waiting, cut := pendingSends(t, rep)
	held := metric(t, rep, "sidecache_client_pending_send_bytes")
	if cut != 0 || waiting != n || held > float64(sendSize) || held < float64(sendSize/2) {
		t.Errorf("%d non-readers of one answer: %v cut, %v waiting holding %v bytes; want none cut, %d waiting, one body (%d bytes at most) held", n, cut, waiting, held, n, sendSize)
	}
	for i, nr := range nrs {
		if body, whole := nr.readAll(t); !whole || !bytes.Equal(body, bigBody("7")) {
			t.Errorf("non-reader %d: %d bytes, whole %v; want the whole answer", i+1, len(body), whole)
		}
	}
}

// TestSendBudgetReloadsInPlace: server.max_pending_send_bytes is a count,
// so a reload applies it without a restart, and a lower bound cuts what
// no longer fits at once: of two non-readers of different answers held
// under a budget of four answers, the older is cut when it falls to one
// and a half.
func TestSendBudgetReloadsInPlace(t *testing.T) {
	o := bigOrigin(t).URL
	fc := startFromFileYAML(t, budgetYAML(4*sendSize, o))
	rep := fc.replica
	rep.get(t, "/big/1")
	rep.get(t, "/big/2")
	older := dialNonReader(t, rep, "/big/1")
	eventually(t, capGuard, "the first non-reader's write waiting", func() bool { w, _ := pendingSends(t, rep); return w == 1 })
	newer := dialNonReader(t, rep, "/big/2")
	eventually(t, capGuard, "both non-readers' writes waiting", func() bool { w, _ := pendingSends(t, rep); return w == 2 })
	if _, cut := pendingSends(t, rep); cut != 0 {
		t.Fatalf("%v cut under a budget of four answers, want none", cut)
	}
	budget := sendSize + sendSize/2
	if err := fc.rewrite(t, budgetYAML(budget, o)); err != nil {
		t.Fatal(err)
	}
	wantReloads(t, fc, "1", "0", "0")
	if got := metric(t, rep, "sidecache_client_pending_send_bytes_max"); got != float64(budget) {
		t.Errorf("sidecache_client_pending_send_bytes_max = %v after the reload, want %d", got, budget)
	}
	waiting, cut := pendingSends(t, rep)
	if cut != 1 || waiting != 1 {
		t.Errorf("after the budget fell to one and a half answers: %v cut, %v waiting; want 1 cut, 1 waiting", cut, waiting)
	}
	if _, whole := older.readAll(t); whole {
		t.Error("the older non-reader read its whole answer: not cut")
	}
	if body, whole := newer.readAll(t); !whole || !bytes.Equal(body, bigBody("2")) {
		t.Errorf("the newer non-reader: %d bytes, whole %v; want its whole answer", len(body), whole)
	}
}
