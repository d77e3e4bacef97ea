package invariant

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// The header-budget row. The budget replica (Config.Budgeted) also has
// server.max_pending_header_bytes headerBudget (16 KiB): two header
// sections of 6-7 KiB still being read fit it, a third does not
// (internal/headerbudget). In about one round in ten (stream 73), once
// the round is over, a stage:
//
//  1. opens k (3 or 4) clients, one after the other, each from an
//     identity's address, each sending 6-7 KiB of a GET /r header section
//     (one long field line) and stalling in it; after each, the replica
//     must hold exactly the sections the budget keeps
//     (sidecache_client_pending_header_bytes) and have cut the others
//     (sidecache_edge_refused_total{reason="header-budget"}): the largest
//     other first, among equals the one stalled longest, the growing one
//     never;
//  2. after each, a client that sends an ordinary read of an /r resource
//     at once must be answered, whole and right (checked as any read);
//  3. each cut client must read a 431 and the end of its stream; each kept
//     one ends its section and must be answered 200.
//
// Without the budget every section is held until read_header_timeout:
// a header-budget violation (nothing held is counted, none cut). Every
// wait is bounded by capGuard.
//
// Checked counts header-budget-stages, header-budget-cut and
// header-budget-read-<status>.

const (
	headerBudget   = 16 << 10
	headerSizeMin  = 6 << 10
	headerBase     = 76000 // the /r ids of the stalled sections and reads
	headerMaxConns = 4
)

func (r *run) headerBudgetRow(ctx context.Context) {
	if !r.cfg.Mix.Has("header-budget") || r.cfg.Budgeted == "" || r.heads.IntN(100) >= 10 {
		return
	}
	rng := r.heads
	r.chk.Count("header-budget-stages", 1)
	k := 3 + rng.IntN(headerMaxConns-2)
	base := headerBase + r.headStages*2*headerMaxConns
	r.headStages++
	held0, cut0, ok := r.headerCounts(ctx)
	if !ok {
		return
	}
	type stalled struct {
		c    net.Conn
		size int
		cut  bool
	}
	var all []*stalled
	defer func() {
		for _, s := range all {
			s.c.Close()
		}
	}()
	for j := range k {
		who := r.gen.Who(rng.IntN(4))
		c, err := sendDial(ctx, who, r.cfg.Budgeted)
		if err != nil {
			r.violate("transport", "budget replica: dial from %s: %v", who.Addr, err)
			return
		}
		s := &stalled{c: c, size: headerSizeMin + rng.IntN(1024)}
		all = append(all, s)
		_ = c.SetDeadline(time.Now().Add(capGuard))
		head := fmt.Sprintf("GET /r/%d HTTP/1.1\r\nHost: budget.svc\r\nX-Pad: ", base+j)
		if _, err := io.WriteString(c, head+strings.Repeat("p", s.size-len(head))); err != nil {
			r.violate("transport", "budget replica: stalled section %d: %v", j+1, err)
			return
		}
		// The model: over the budget, the largest other kept section is
		// cut, among equals the one stalled longest (the earlier).
		var kept []*stalled
		total := 0
		for _, o := range all {
			if !o.cut {
				kept, total = append(kept, o), total+o.size
			}
		}
		others := slices.Clone(kept[:len(kept)-1])
		slices.SortStableFunc(others, func(a, b *stalled) int { return b.size - a.size })
		for _, o := range others {
			if total <= headerBudget {
				break
			}
			o.cut, total = true, total-o.size
		}
		cuts := 0
		for _, o := range all {
			if o.cut {
				cuts++
			}
		}
		deadline := time.Now().Add(capGuard)
		for {
			held, cut, ok := r.headerCounts(ctx)
			if !ok {
				return
			}
			if held-held0 == float64(total) && cut-cut0 == float64(cuts) {
				break
			}
			if time.Now().After(deadline) {
				r.violate("header-budget", "budget replica: %d stalled header sections (max_pending_header_bytes %d): %v bytes held, %v cut (header-budget); want %d held, %d cut", j+1, headerBudget, held-held0, cut-cut0, total, cuts)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		// An ordinary read beside them: answered whole and right.
		q := tunnelRead(who, r.budgetIndex(), fmt.Sprintf("/r/%d", base+headerMaxConns+j))
		if !r.headerRead(ctx, who, q) {
			return
		}
	}
	for j, s := range all {
		_ = s.c.SetDeadline(time.Now().Add(capGuard))
		if s.cut {
			r.chk.Count("header-budget-cut", 1)
			got, err := io.ReadAll(s.c)
			if err != nil || !strings.HasPrefix(string(got), "HTTP/1.1 431 ") {
				r.violate("header-budget", "budget replica: stalled section %d of %d (cut): read %q, err %v; want a 431 and the end of the stream", j+1, k, got, err)
			}
			continue
		}
		if _, err := io.WriteString(s.c, "\r\n\r\n"); err != nil {
			r.violate("header-budget", "budget replica: stalled section %d of %d (kept): ending it: %v", j+1, k, err)
			continue
		}
		resp, err := http.ReadResponse(bufio.NewReader(s.c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			r.violate("header-budget", "budget replica: stalled section %d of %d (kept), once ended: %v, err %v; want 200", j+1, k, resp, err)
			continue
		}
		resp.Body.Close()
	}
}

// headerRead sends q at once on a new connection from who and checks its
// answer as any read's; false after a violation.
func (r *run) headerRead(ctx context.Context, who *traffic.Identity, q *traffic.Request) bool {
	c, err := sendDial(ctx, who, r.cfg.Budgeted)
	if err != nil {
		r.violate("transport", "budget replica: dial from %s: %v", who.Addr, err)
		return false
	}
	defer c.Close()
	req, err := r.gen.HTTPRequest(ctx, q, r.cfg.Budgeted)
	if err != nil {
		r.violate("harness", "%s: %v", q, err)
		return false
	}
	_ = c.SetDeadline(time.Now().Add(capGuard))
	start := check.Now()
	if err := req.Write(c); err != nil {
		r.violate("header-budget", "budget replica: %s beside stalled header sections: %v", q, err)
		return false
	}
	hreq, _ := http.NewRequest(q.Method, r.cfg.Budgeted+q.Path, nil)
	resp, err := readFinal(bufio.NewReader(c), hreq)
	if err != nil {
		r.violate("header-budget", "budget replica: %s beside stalled header sections: %v", q, err)
		return false
	}
	body, err := check.ReadBody(resp)
	resp.Body.Close()
	end := check.Now()
	if err != nil {
		r.violate("header-budget", "budget replica: %s beside stalled header sections: body: %v", q, err)
		return false
	}
	r.chk.Count("header-budget-read-"+resp.Status[:3], 1)
	r.chk.Answer(q, resp, body, start, end)
	return true
}

// headerCounts reads the budget replica's header bytes held and the
// connections its header budget cut so far.
func (r *run) headerCounts(ctx context.Context) (held, cut float64, ok bool) {
	held, err := readCounter(ctx, r.cfg.BudgetedAdmin, func(line string) bool {
		return strings.HasPrefix(line, "sidecache_client_pending_header_bytes ")
	})
	if err == nil {
		cut, err = readCounter(ctx, r.cfg.BudgetedAdmin, func(line string) bool {
			return strings.HasPrefix(line, `sidecache_edge_refused_total{reason="header-budget"} `)
		})
	}
	if err != nil {
		r.violate("harness", "budget replica: /metrics: %v", err)
		return 0, 0, false
	}
	return held, cut, true
}
