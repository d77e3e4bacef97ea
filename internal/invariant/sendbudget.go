package invariant

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// The send-budget row. The budget replica (Config.Budgeted) is a peer of
// the others (one Redis, one origin) whose server.max_pending_send_bytes
// is 1 byte: two writes of different answers cannot both wait on full
// client sockets, so each write that begins to wait cuts the one that
// waited before it (internal/sendbudget). In about one round in ten
// (stream 65), once the round is over, a stage:
//
//  1. opens k (3 or 4) clients that never read, one after the other, each
//     from an identity's address with a 4 KiB receive buffer, each
//     pipelining reads of two /r resources of its own (sendBase on, the
//     origin answering them with bodies just under max_body_bytes), until
//     the replica's write to it waits (sidecache_client_pending_sends);
//  2. then requires k-1 cut (sidecache_edge_refused_total{reason=
//     "send-budget"}) and one write waiting;
//  3. reads what each non-reader was sent: the first k-1 must end before
//     their last answer (cut), the last must get every answer whole; every
//     answer read whole is checked as any (identity, own-write, max-lag);
//  4. reads each of the stage's resources once more on a client that
//     reads: each answered whole and right.
//
// Without the budget the k writes all wait until write_timeout (60 s),
// each holding its answer: a send-budget violation (none cut). Every wait
// is bounded by capGuard: a hang is a violation, never a hung run.
//
// Checked counts send-budget-stages and send-budget-read-<status>.

// sendBase is the first /r id the row reads; each stage takes
// 2 × sendMaxClients ids past the previous one.
const (
	sendBase       = 70000
	sendMaxClients = 4
	sendBatch      = 16   // pipelined reads sent at a time, after the first batch
	sendMaxReads   = 4096 // per non-reader: far more than two sockets' buffers take
	// sendHang bounds a stage's wait for one non-reader's write to wait:
	// a hang guard, far past what filling the buffers takes.
	sendHang = 6 * capGuard
)

// sendFirst is how many reads of size-byte answers the first batch of a
// non-reader asks for: enough to fill the kernel's largest send buffer
// (tcp_wmem's max, read from /proc; 4 MiB where it cannot be read), the
// client's 4 KiB receive buffer and two MiB more, so that the replica's
// write must wait whatever the buffers grew to.
func sendFirst(size int) int {
	wmem := 4 << 20
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 3 {
			if n, err := strconv.Atoi(f[2]); err == nil && n > 0 {
				wmem = n
			}
		}
	}
	return min(sendMaxReads, (wmem+2<<20)/max(size, 1)+1)
}

// budgetIndex is the budget replica's index as the checks name it: one
// no write goes through, so its reads are held to max-lag only.
func (r *run) budgetIndex() int { return len(r.cfg.Replicas) + 5 }

func (r *run) sendBudget(ctx context.Context) {
	if !r.cfg.Mix.Has("send-budget") || r.cfg.Budgeted == "" || r.sends.IntN(100) >= 10 {
		return
	}
	rng, draws := r.sends, r.sendDraws
	r.chk.Count("send-budget-stages", 1)
	k := 3 + rng.IntN(sendMaxClients-2)
	base := sendBase + r.sendStages*2*sendMaxClients
	r.sendStages++
	size := r.cfg.MaxBodyBytes - 1024 - draws.IntN(1024)
	type nonReader struct {
		c     net.Conn
		br    *bufio.Reader
		sent  []*traffic.Request
		start []time.Time
	}
	var nrs []*nonReader
	defer func() {
		for _, nr := range nrs {
			nr.c.Close()
		}
	}()
	waiting0, cut0, ok := r.sendCounts(ctx)
	if !ok {
		return
	}
	for j := range k {
		paths := []string{fmt.Sprintf("/r/%d", base+2*j), fmt.Sprintf("/r/%d", base+2*j+1)}
		for _, p := range paths {
			r.cfg.Origin.SetProfile(origin.Resource(p), origin.Profile{Size: size})
		}
		who := r.gen.Who(draws.IntN(4))
		c, err := sendDial(ctx, who, r.cfg.Budgeted)
		if err != nil {
			r.violate("transport", "budget replica: dial from %s: %v", who.Addr, err)
			return
		}
		nr := &nonReader{c: c, br: bufio.NewReader(c)}
		nrs = append(nrs, nr)
		// Counts, not the clock, decide: the first batch alone asks for
		// more than the socket buffers between the replica and this
		// client can take (sendFirst), so its write must wait once it has
		// answered what fits; the row scrapes /metrics only after it. A
		// violation is a write never seen waiting once sendMaxReads were
		// asked or the socket took no more (full, then capGuard), or a
		// stage that made no end in sendHang: on a loaded machine under
		// -race a scrape takes tens of milliseconds, and a guard of
		// capGuard from the first read cut the stage at 48-192 reads,
		// before the kernel's send buffer (tcp_wmem's max, 4 MiB) was full.
		hang := time.Now().Add(sendHang)
		var full time.Time
		for batch := sendFirst(size); ; batch = sendBatch {
			if len(nr.sent) < sendMaxReads && full.IsZero() {
				_ = c.SetWriteDeadline(time.Now().Add(capGuard / 10))
				for range min(batch, sendMaxReads-len(nr.sent)) {
					q := tunnelRead(who, r.budgetIndex(), paths[len(nr.sent)%2])
					req, err := r.gen.HTTPRequest(ctx, q, r.cfg.Budgeted)
					if err != nil {
						r.violate("harness", "%s: %v", q, err)
						return
					}
					start := check.Now()
					if err := req.Write(c); err != nil {
						full = time.Now() // its socket is full too: the sidecar stopped reading it
						break
					}
					nr.sent, nr.start = append(nr.sent, q), append(nr.start, start)
				}
				if len(nr.sent) >= sendMaxReads && full.IsZero() {
					full = time.Now()
				}
			}
			w, cut, ok := r.sendCounts(ctx)
			if !ok {
				return
			}
			if w+cut-waiting0-cut0 >= float64(j+1) {
				break
			}
			if now := time.Now(); now.After(hang) || !full.IsZero() && now.After(full.Add(capGuard)) {
				r.violate("send-budget", "budget replica: non-reader %d of %d: no write to it seen waiting (sidecache_client_pending_sends) after %d pipelined reads of %d-byte answers", j+1, k, len(nr.sent), size)
				return
			}
			time.Sleep(time.Millisecond)
		}
		_ = c.SetDeadline(time.Now().Add(capGuard))
	}
	waiting, cut, ok := r.sendCounts(ctx)
	if !ok {
		return
	}
	if cut-cut0 != float64(k-1) || waiting-waiting0 != 1 {
		r.violate("send-budget", "budget replica: %d non-readers of different answers, each left with a write waiting, max_pending_send_bytes 1: %v cut (send-budget), %v waiting; want %d cut, 1 waiting", k, cut-cut0, waiting-waiting0, k-1)
	}
	for j, nr := range nrs {
		read := r.sendRead(nr.c, nr.br, nr.sent, nr.start)
		switch {
		case j < k-1 && read == len(nr.sent):
			r.violate("send-budget", "budget replica: non-reader %d of %d read all %d answers whole: its write was never cut", j+1, k, read)
		case j == k-1 && read < len(nr.sent):
			r.violate("send-budget", "budget replica: the last non-reader (%d of %d) read %d of its %d answers whole: cut, though it was the only write waiting", j+1, k, read, len(nr.sent))
		}
	}
	// A client that reads: every resource of the stage, whole and right.
	who := r.gen.Who(draws.IntN(4))
	c, err := sendDial(ctx, who, r.cfg.Budgeted)
	if err != nil {
		r.violate("transport", "budget replica: dial from %s: %v", who.Addr, err)
		return
	}
	nrs = append(nrs, &nonReader{c: c})
	br := bufio.NewReader(c)
	for j := range 2 * k {
		q := tunnelRead(who, r.budgetIndex(), fmt.Sprintf("/r/%d", base+j))
		req, err := r.gen.HTTPRequest(ctx, q, r.cfg.Budgeted)
		if err != nil {
			r.violate("harness", "%s: %v", q, err)
			return
		}
		start := check.Now()
		_ = c.SetDeadline(time.Now().Add(capGuard))
		if err := req.Write(c); err != nil {
			r.violate("transport", "budget replica: %s: reading client: %v", q, err)
			return
		}
		if r.sendRead(c, br, []*traffic.Request{q}, []time.Time{start}) != 1 {
			r.violate("send-budget", "budget replica: %s: a client that reads was not answered whole", q)
			return
		}
	}
}

// sendRead reads the answers to sent on c, in order, checking each that
// comes whole, and returns how many did.
func (r *run) sendRead(c net.Conn, br *bufio.Reader, sent []*traffic.Request, start []time.Time) int {
	_ = c.SetDeadline(time.Now().Add(capGuard))
	for i, q := range sent {
		req, _ := http.NewRequest(q.Method, r.cfg.Budgeted+q.Path, nil)
		resp, err := readFinal(br, req)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				r.violate("send-budget", "budget replica: %s: not answered within %v", q, capGuard)
			}
			return i
		}
		body, err := check.ReadBody(resp)
		resp.Body.Close()
		end := check.Now()
		if err != nil {
			return i // cut mid-answer: short of its Content-Length
		}
		r.chk.Count("send-budget-read-"+resp.Status[:3], 1)
		r.chk.Answer(q, resp, body, start[i], end)
	}
	return len(sent)
}

// sendCounts reads the budget replica's waiting writes and the writes
// its budget cut so far.
func (r *run) sendCounts(ctx context.Context) (waiting, cut float64, ok bool) {
	waiting, err := readCounter(ctx, r.cfg.BudgetedAdmin, func(line string) bool {
		return strings.HasPrefix(line, "sidecache_client_pending_sends ")
	})
	if err == nil {
		cut, err = readCounter(ctx, r.cfg.BudgetedAdmin, func(line string) bool {
			return strings.HasPrefix(line, `sidecache_edge_refused_total{reason="send-budget"} `)
		})
	}
	if err != nil {
		r.violate("harness", "budget replica: /metrics: %v", err)
		return 0, 0, false
	}
	return waiting, cut, true
}

// sendDial opens a connection from who's address to base with a 4 KiB
// receive buffer, set before the handshake so the window it offers is
// small: a large answer not read fills it at once.
func sendDial(ctx context.Context, who *traffic.Identity, base string) (net.Conn, error) {
	d := net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP(who.Addr)},
		Timeout:   5 * time.Second,
		Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			}); err != nil {
				return err
			}
			return serr
		},
	}
	return d.DialContext(ctx, "tcp", strings.TrimPrefix(base, "http://"))
}
