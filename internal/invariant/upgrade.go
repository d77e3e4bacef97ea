package invariant

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// The upgrade row. In about one round in seven, once the round is over
// (its calls counted: a stage spends no round's budget), a stage opens
// upgrade requests one after another through one replica, each on a
// connection of its own from an identity's address, and holds what they
// open: half the stages first open upstream.max_tunnels echo tunnels
// (the cap probe), so the requests after them meet the cap. Each request
// draws the origin's answer (origin/upgrade.go: echo, any, refuse,
// close, hangup, silent), the Upgrade it asks (websocket, which the
// replicas allow; foo or h2c, which they drop; none), forged forwarding
// fields (X-Forwarded-*, Forwarded, underscore spellings), its target
// (/ws/<n>, no route: pass-through; /r/<id> with a cookie: a cached
// route's bypass; /r/<id> without: the cached path), cached reads of /r
// sent before it on the same keep-alive connection, and one after it when
// it was not switched. Then:
//
//   - tunnel-cross: each echo tunnel sends three lines of its own and
//     must get back exactly those; the origin records a line of another
//     tunnel on its side;
//   - upgrade: no 101 reaches a client that asked no upgrade the
//     replicas allow (RFC 9110 §15.2.2), a 200 on the tunnel endpoint is
//     the origin's answer to this very request, and the cached reads on
//     the same connections, and of every /r the stage touched read back
//     through each replica afterwards, pass every check of an answer
//     (check.Answer: a tunnel's bytes stored or served as /r are garbled);
//   - tunnel-limit: the tunnels that still echo once every request was
//     answered were all open at once, so they are at most max_tunnels; a
//     503 carries Retry-After and its request never reaches the origin;
//     a cap-probe request refused for five seconds is a slot never freed;
//   - tunnel-idle: a silent tunnel (nothing either way) is closed by the
//     replica, on both sides, and counted in
//     sidecache_edge_refused_total{reason="tunnel-idle"} (at least one
//     per silent tunnel): by counts and state, not timing;
//   - tunnel: every tunnel's upstream side ends once its client closed;
//   - upgrade-forged: the origin saw on no upgrade request a forged
//     forwarding value, an underscore spelling, or an X-Forwarded-For
//     other than its client's address.
//
// Checked counts tunnel-<status> by mode, tunnel-echoed, tunnel-silent-cut,
// tunnel-probe-retries and upgrade-read-<status>.

// tunnelTry is one upgrade request of a stage and what came of it.
type tunnelTry struct {
	id     string
	who    *traffic.Identity
	path   string
	kind   string // ws, bypass (route r with a cookie), cached (route r)
	mode   string // the origin's (origin/upgrade.go)
	ask    string // the Upgrade sent: websocket, foo, h2c or ""
	forged bool
	before int  // cached reads sent first on the connection
	after  bool // a cached read after it, when not switched

	conn     net.Conn
	br       *bufio.Reader
	status   int
	switched bool
}

// tunnelGuard is how long the stage waits for a tunnel's end or echo
// before it calls it held: far past the replicas' tunnel_idle_timeout.
const tunnelGuard = 10 * time.Second

// upgrades plays the upgrade row's stage after a round (see above).
func (r *run) upgrades(ctx context.Context) {
	if !r.cfg.Mix.Has("upgrade") || r.cfg.MaxTunnels <= 0 || len(r.cfg.Admins) < len(r.cfg.Replicas) || r.tunnelRng.IntN(100) >= 15 {
		return
	}
	rng := r.tunnelRng
	i := rng.IntN(len(r.cfg.Replicas))
	cuts, ok := r.tunnelCuts(ctx, i)
	if !ok {
		return
	}
	probe := 0
	if rng.IntN(2) == 0 {
		probe = r.cfg.MaxTunnels
	}
	var tries []*tunnelTry
	defer func() {
		for _, t := range tries {
			if t.conn != nil {
				t.conn.Close()
			}
		}
	}()
	var refused []string // ids answered 503
	for j, n := 0, probe+1+rng.IntN(3); j < n; j++ {
		t := r.drawTunnel(rng, j < probe)
		tries = append(tries, t)
		for deadline := time.Now().Add(5 * time.Second); ; {
			r.openTunnel(ctx, i, t)
			if t.status != http.StatusServiceUnavailable || t.ask != "websocket" || t.kind == "cached" {
				break
			}
			refused = append(refused, t.id)
			if j >= probe {
				break
			}
			// A probe request meets no cap but the tunnels a stage
			// before held: their slots are given back once the replica
			// has closed both their sides, on its own goroutine.
			if time.Now().After(deadline) {
				r.violate("tunnel-limit", "replica %d: a tunnel refused 503 for 5 s with %d of this stage's open (max_tunnels %d): a slot never freed", i, j, r.cfg.MaxTunnels)
				break
			}
			r.chk.Count("tunnel-probe-retries", 1)
			time.Sleep(10 * time.Millisecond)
			t.conn.Close()
			t.id += "r"
		}
	}
	r.echoAll(i, tries)
	r.silentCut(ctx, i, tries, cuts)
	for _, t := range tries {
		if t.conn != nil {
			t.conn.Close()
		}
	}
	reads := map[string]*traffic.Identity{}
	for _, t := range tries {
		if calls, _ := r.cfg.Origin.TunnelCalls(t.id); calls == 0 {
			continue
		}
		_, ended := r.cfg.Origin.TunnelCalls(t.id)
		select {
		case <-ended:
		case <-time.After(tunnelGuard):
			r.violate("tunnel", "replica %d: %s: the tunnel's upstream side still open %v after its client closed", i, t, tunnelGuard)
		}
	}
	for _, t := range tries {
		if t.kind != "ws" {
			reads[t.path] = t.who
		}
	}
	for _, id := range refused {
		if calls, _ := r.cfg.Origin.TunnelCalls(id); calls > 0 {
			r.violate("tunnel-limit", "replica %d: tunnel %s answered 503 past max_tunnels, yet its request reached the origin", i, id)
		}
	}
	for _, f := range r.cfg.Origin.TakeTunnelFaults() {
		kind := "upgrade-forged"
		if strings.Contains(f, "not its own bytes") {
			kind = "tunnel-cross"
		}
		r.violate(kind, "replica %d: %s", i, f)
	}
	// Nothing of a tunnel is stored: each /r the stage asked to upgrade,
	// read back plainly through every replica.
	for _, path := range slices.Sorted(maps.Keys(reads)) {
		for k := range r.cfg.Replicas {
			r.readBack(ctx, tunnelRead(reads[path], k, path), r.cfg.Replicas[k], "read after upgrades", "upgrade-read-")
		}
	}
}

func (t *tunnelTry) String() string {
	return fmt.Sprintf("%s(%s) GET %s [tunnel %s, %s, mode %s, Upgrade %q, forged %v]", t.who.Name, t.who.Addr, t.path, t.id, t.kind, t.mode, t.ask, t.forged)
}

// drawTunnel draws one upgrade request; a probe one is an echo tunnel
// asked for on the tunnel endpoint. The draws are the same either way,
// so the sequence does not depend on which it is.
func (r *run) drawTunnel(rng *rand.Rand, probe bool) *tunnelTry {
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	t := &tunnelTry{
		id:     fmt.Sprintf("t%d-%d", r.cfg.Seed, r.tunnelIDs.Add(1)),
		who:    r.gen.Who(rng.IntN(4)),
		mode:   pick("echo", "echo", "echo", "any", "silent", "silent", "refuse", "close", "hangup"),
		kind:   pick("ws", "ws", "ws", "ws", "ws", "ws", "bypass", "bypass", "cached", "cached"),
		ask:    "websocket",
		forged: rng.IntN(2) == 0,
		before: max(0, rng.IntN(5)-2),
		after:  rng.IntN(2) == 0,
	}
	if rng.IntN(100) < 25 {
		t.ask = pick("", "foo", "h2c")
	}
	t.path = fmt.Sprintf("/ws/%d", 1+rng.IntN(4))
	if n := 1 + rng.IntN(4); t.kind != "ws" {
		t.path = fmt.Sprintf("/r/%d", n)
	}
	if probe {
		t.mode, t.kind, t.ask, t.path, t.before = "echo", "ws", "websocket", "/ws/0", 0
	}
	return t
}

// openTunnel sends t's cached reads and then its upgrade request on a new
// connection to replica i, and judges the answer; a switched connection
// is kept in t for the checks after.
func (r *run) openTunnel(ctx context.Context, i int, t *tunnelTry) {
	t.status, t.switched = 0, false
	host := strings.TrimPrefix(r.cfg.Replicas[i], "http://")
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(t.who.Addr)}, Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		r.violate("transport", "%s: %v", t, err)
		return
	}
	t.conn, t.br = conn, bufio.NewReader(conn)
	conn.SetDeadline(time.Now().Add(3 * tunnelGuard))
	for n := 0; n < t.before; n++ {
		if !r.readOn(t, i, fmt.Sprintf("/r/%d", 1+(n+len(t.id))%4)) {
			return
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\n%s: %s %s\r\n%s: %s\r\n", t.path, r.cfg.Host, origin.TunnelHeader, t.id, t.who.Addr, origin.TunnelModeHeader, t.mode)
	if t.ask != "" {
		fmt.Fprintf(&b, "Connection: Upgrade\r\nUpgrade: %s\r\n", t.ask)
	}
	if t.ask == "h2c" {
		b.WriteString("HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n")
	}
	if t.kind == "bypass" {
		fmt.Fprintf(&b, "Cookie: sid=%s\r\n", t.who.Name)
	}
	if t.forged {
		fmt.Fprintf(&b, "X-Forwarded-For: %[1]s\r\nX-Forwarded-Host: %[2]s\r\nForwarded: for=%[1]s;host=%[2]s\r\nX_Forwarded_For: %[1]s\r\nX-Forwarded_Host: %[2]s\r\nX_Real_Ip: %[1]s\r\nX-Real-Ip: %[1]s\r\nTrue-Client-Ip: %[1]s\r\n", origin.ForgedAddr, origin.ForgedHost)
	}
	b.WriteString("\r\n")
	req, _ := http.NewRequest(http.MethodGet, r.cfg.Replicas[i]+t.path, nil)
	start := check.Now()
	if _, err := io.WriteString(conn, b.String()); err != nil {
		r.violate("transport", "%s: %v", t, err)
		return
	}
	resp, err := readFinal(t.br, req)
	if err != nil {
		r.chk.Count("tunnel-no-answer-"+t.mode, 1)
		return
	}
	t.status = resp.StatusCode
	r.chk.Count(fmt.Sprintf("tunnel-%d-%s", t.status, t.mode), 1)
	if t.status == http.StatusSwitchingProtocols {
		if t.ask != "websocket" {
			r.violate("upgrade", "replica %d: %s: 101 relayed to a client that asked no upgrade the replicas allow", i, t)
			return
		}
		t.switched = true
		return
	}
	body, err := check.ReadBody(resp)
	resp.Body.Close()
	if err != nil {
		if !r.brokenOff(err) {
			r.violate("garbled", "%s: reading the answer: %v", t, err)
		}
		return
	}
	got := string(body)
	switch {
	case t.status == http.StatusServiceUnavailable && t.ask == "websocket" && t.kind != "cached":
		if resp.Header.Get("Retry-After") == "" {
			r.violate("tunnel-limit", "replica %d: %s: 503 without Retry-After", i, t)
		}
	case got == origin.Refused(t.id) || got == origin.NotUpgraded(t.id):
		// The endpoint's own answer to this request.
	case t.kind == "cached":
		// The cached path's answer to a read of /r: checked as any.
		q := tunnelRead(t.who, i, t.path)
		if t.ask != "" {
			q.Hdr.Set("Upgrade", t.ask)
		}
		r.chk.Answer(q, resp, body, start, check.Now())
	case t.status == http.StatusOK:
		r.violate("upgrade", "replica %d: %s: 200 with %.60q, not the origin's answer to this request", i, t, got)
	}
	if t.after && !resp.Close {
		r.readOn(t, i, fmt.Sprintf("/r/%d", 1+len(t.id)%4))
	}
}

// readFinal reads the answer to req off br past its interim answers (a
// 101 is final: RFC 9110 §15.2).
func readFinal(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil || resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, err
		}
	}
}

// tunnelRead is a plain read of path (on route r) by who through replica
// k, as the checks hold it.
func tunnelRead(who *traffic.Identity, k int, path string) *traffic.Request {
	return &traffic.Request{
		Kind: "read", Route: "r", Replica: k, Who: who, Method: http.MethodGet, Path: path, Hdr: http.Header{},
		Sent: map[string]string{"addr": who.Addr, "cookie": "", "auth": "", "tenant": "", "lang": ""},
		Res:  origin.Resource(path), Budget: traffic.BudgetRead,
	}
}

// readOn sends a plain read of path on t's connection and checks its
// answer; it reports whether the connection may carry another request.
func (r *run) readOn(t *tunnelTry, i int, path string) bool {
	q := tunnelRead(t.who, i, path)
	req, _ := http.NewRequest(http.MethodGet, r.cfg.Replicas[i]+path, nil)
	start := check.Now()
	if _, err := fmt.Fprintf(t.conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, r.cfg.Host); err != nil {
		r.chk.Count("upgrade-conn-closed", 1)
		return false
	}
	resp, err := readFinal(t.br, req)
	if err != nil {
		r.chk.Count("upgrade-conn-closed", 1) // a keep-alive connection may close between requests
		return false
	}
	body, err := check.ReadBody(resp)
	resp.Body.Close()
	end := check.Now()
	if err != nil {
		if !r.brokenOff(err) {
			r.violate("garbled", "%s: on tunnel %s's connection: %v", q, t.id, err)
		}
		return false
	}
	r.chk.Count("upgrade-conn-read-"+resp.Status[:3], 1)
	r.chk.Answer(q, resp, body, start, end)
	return !resp.Close
}

// echoAll sends three lines of its own through every switched echo
// tunnel at once: each must come back as sent. Those that do were all
// open once the stage's last request was answered (a closed tunnel does
// not reopen), so at once: at most max_tunnels of them.
func (r *run) echoAll(i int, tries []*tunnelTry) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	echoed := 0
	for _, t := range tries {
		if !t.switched || t.mode != "echo" && t.mode != "any" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 3 {
				line := fmt.Sprintf("%s:%d\n", t.id, n)
				if _, err := io.WriteString(t.conn, line); err != nil {
					r.chk.Count("tunnel-cut", 1)
					return
				}
				got, err := t.br.ReadString('\n')
				if err != nil {
					r.chk.Count("tunnel-cut", 1) // idle-cut while the stage opened others
					return
				}
				if got != line {
					r.violate("tunnel-cross", "replica %d: %s: sent %q, got %q", i, t, line, got)
					return
				}
			}
			mu.Lock()
			echoed++
			mu.Unlock()
		}()
	}
	wg.Wait()
	r.chk.Count("tunnel-echoed", echoed)
	if echoed > r.cfg.MaxTunnels {
		r.violate("tunnel-limit", "replica %d: %d tunnels open at once, max_tunnels %d", i, echoed, r.cfg.MaxTunnels)
	}
}

// silentCut waits for each switched silent tunnel to be closed by the
// replica, and checks the cuts were counted (cuts: the counter before).
func (r *run) silentCut(ctx context.Context, i int, tries []*tunnelTry, cuts float64) {
	silent := 0
	for _, t := range tries {
		if !t.switched || t.mode != "silent" {
			continue
		}
		t.conn.SetReadDeadline(time.Now().Add(tunnelGuard))
		n, err := t.br.Read(make([]byte, 1))
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			r.violate("tunnel-idle", "replica %d: %s: a silent tunnel still open after %v (tunnel_idle_timeout %v)", i, t, tunnelGuard, r.cfg.TunnelIdle)
			continue
		case n > 0:
			r.violate("tunnel-cross", "replica %d: %s: a silent tunnel delivered bytes", i, t)
			continue
		}
		silent++
	}
	if silent == 0 {
		return
	}
	r.chk.Count("tunnel-silent-cut", silent)
	if after, ok := r.tunnelCuts(ctx, i); ok && after-cuts < float64(silent) {
		r.violate("tunnel-idle", "replica %d: %d silent tunnels closed, edge_refused{reason=\"tunnel-idle\"} grew by %v", i, silent, after-cuts)
	}
}

// tunnelCuts reads replica i's sidecache_edge_refused_total{reason="tunnel-idle"}.
func (r *run) tunnelCuts(ctx context.Context, i int) (float64, bool) {
	n, err := readCounter(ctx, r.cfg.Admins[i], func(line string) bool {
		return strings.HasPrefix(line, "sidecache_edge_refused_total{") && strings.Contains(line, `reason="tunnel-idle"`)
	})
	if err != nil {
		r.violate("harness", "replica %d: /metrics: %v", i, err)
		return 0, false
	}
	return n, true
}
