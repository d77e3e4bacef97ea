package lab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// boundFull is the share of BoundL1Bytes at which the bound row's L1
// counts as full. Ristretto admits an entry only while the costs it holds
// fit in max_bytes, so a full L1 sits just under the bound (an entry is
// about 1.3 KB of 32 MiB).
const boundFull = 0.95

// l1Gauges is what the bound row reads from a sidecar's /metrics
// (docs/metrics.md): the L1's bytes and items, and the ids its batch
// routes fetched from the upstream (sidecache_batch_size's sum), each
// one stored in L1 unless refused. Bytes held steady while ids keep
// being fetched is an L1 evicting (or refusing) as many as it stores.
type l1Gauges struct {
	bytes, items, fetched float64
}

// parseL1Gauges reads l1Gauges from the Prometheus text format.
func parseL1Gauges(text string) (l1Gauges, error) {
	var g l1Gauges
	var seen bool
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		name := line[:sp]
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		switch name {
		case "sidecache_l1_bytes":
			g.bytes, seen = v, true
		case "sidecache_l1_items":
			g.items = v
		case "sidecache_batch_size_sum": // one series per batch route
			g.fetched += v
		}
	}
	if !seen {
		return g, errors.New("no sidecache_l1_bytes in /metrics (L1 off?)")
	}
	return g, nil
}

// l1Of scrapes s's /metrics.
func l1Of(ctx context.Context, s *sut) (l1Gauges, error) {
	if s.admin == "" {
		return l1Gauges{}, errors.New("not a sidecar: no /metrics")
	}
	code, body, err := httpDo(ctx, "GET", s.admin+"/metrics", nil)
	if err == nil && code != 200 {
		err = fmt.Errorf("status %d", code)
	}
	if err != nil {
		return l1Gauges{}, fmt.Errorf("metrics: %w", err)
	}
	return parseL1Gauges(string(body))
}

// evicted is how many of the ids fetched between a and b the L1 no longer
// holds: evicted to make room, or refused admission.
func evicted(a, b l1Gauges) float64 { return (b.fetched - a.fetched) - (b.items - a.items) }

// boundRow keeps the "batched miss, L1 at its bound" row's sidecar full
// and evicting before each measured round, and what shows it was, for the
// row's note: the same load as the batch row, on a sidecar past its first
// minutes instead of in them.
type boundRow struct {
	ctx  context.Context
	cold *coldIDs
	max  float64 // the L1's max_bytes
	// chunk is how many cold ids the fill requests between two reads of
	// the L1's bytes; 0: 4,000 (at most ~5 MiB past the bound, 1.3 KB an
	// entry).
	chunk int

	mu       sync.Mutex
	warmed   int        // cold ids requested before the first round
	filledAt int        // of which when the L1 first counted as full
	start    []l1Gauges // at each round's start
	end      []l1Gauges // at each round's end
	topUps   int        // cold ids requested before later rounds (the 5 min TTL expired meanwhile)
}

// prep runs before the warm-up and before every round (cpuEntry.prep).
// The first time, it requests cold ids until the L1 is full, then as many
// again as it holds, so every entry then held was stored into a full
// cache (its maps at their full size, the heap at its steady size, the
// memory of evicted entries reused), and fails unless that turnover
// evicted. Before a round, it tops the L1 up should entries have expired
// while other rows ran, and records the L1's state.
func (b *boundRow) prep(s *sut) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	first := b.warmed == 0
	g, n, err := b.fill(s)
	if err != nil {
		return err
	}
	if !first {
		b.topUps += n
		b.start = append(b.start, g)
		return nil
	}
	b.filledAt = n
	before := g
	turn := int(g.items)
	if err := b.send(s, turn); err != nil {
		return err
	}
	if g, err = l1Of(b.ctx, s); err != nil {
		return err
	}
	b.warmed = n + turn
	if err := checkBound(before, g, b.max); err != nil {
		return fmt.Errorf("l1 not at its bound after %d cold ids: %w", b.warmed, err)
	}
	log.Printf("  L1 at its bound after %d cold ids (full after %d): %.1f MiB, %.0f items; the last %d evicted or refused %.0f",
		b.warmed, b.filledAt, g.bytes/(1<<20), g.items, turn, evicted(before, g))
	return nil
}

// checkBound: after a turnover from a to b, the L1 is full and evicted
// (or refused) at least half of what was fetched meanwhile.
func checkBound(a, b l1Gauges, max float64) error {
	if b.bytes < boundFull*max {
		return fmt.Errorf("sidecache_l1_bytes %.0f, under %.0f %% of %.0f", b.bytes, 100*boundFull, max)
	}
	if f := b.fetched - a.fetched; f <= 0 || evicted(a, b) < f/2 {
		return fmt.Errorf("%.0f ids fetched, items held %+.0f: not evicting", f, b.items-a.items)
	}
	return nil
}

// after records the L1's state at a round's end (cpuEntry.after).
func (b *boundRow) after(s *sut) error {
	g, err := l1Of(b.ctx, s)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.start) != len(b.end)+1 {
		return errors.New("l1 at its bound: a round's end without its start")
	}
	a := b.start[len(b.end)]
	b.end = append(b.end, g)
	log.Printf("  L1 at its bound: round start %.1f MiB %.0f items, end %.1f MiB %.0f items; %.0f ids fetched, %.0f evicted or refused",
		a.bytes/(1<<20), a.items, g.bytes/(1<<20), g.items, g.fetched-a.fetched, evicted(a, g))
	return nil
}

// fill requests cold ids until the L1 counts as full, and reports its
// state then and how many it requested. An L1 whose bytes stop growing
// below the bound fails it.
func (b *boundRow) fill(s *sut) (l1Gauges, int, error) {
	chunk := cmp.Or(b.chunk, 4000)
	g, err := l1Of(b.ctx, s)
	n := 0
	for err == nil && g.bytes < boundFull*b.max {
		if err = b.send(s, chunk); err != nil {
			break
		}
		n += chunk
		prev := g
		if g, err = l1Of(b.ctx, s); err == nil && g.bytes <= prev.bytes {
			err = fmt.Errorf("l1 stopped filling at %.0f bytes of %.0f after %d cold ids", g.bytes, b.max, n)
		}
	}
	return g, n, err
}

// send requests n cold ids, closed loop on 32 connections: the fill's
// speed does not matter, only that each id is new.
func (b *boundRow) send(s *sut, n int) error {
	const workers = 32
	client := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	next := make(chan int64)
	for range workers {
		wg.Go(func() {
			for id := range next {
				if err := getCold(b.ctx, client, "http://"+s.addr+"/users/"+strconv.FormatInt(id, 10)); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for range n {
		if b.ctx.Err() != nil {
			break
		}
		next <- b.cold.take()
	}
	close(next)
	wg.Wait()
	if first == nil {
		first = b.ctx.Err()
	}
	return first
}

func getCold(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	return nil
}

// note is the row's note: the bound, how it was reached, and the L1's
// state at the rounds' starts and over them.
func (b *boundRow) note() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s strings.Builder
	fmt.Fprintf(&s, "l1.max_bytes %s (the batched miss row's sidecar has 256MiB, filling all run); before the first round %d cold ids, "+
		"the L1 full (sidecache_l1_bytes ≥ %.0f %% of its bound) after %d of them", BoundL1, b.warmed, 100*boundFull, b.filledAt)
	if b.topUps > 0 {
		fmt.Fprintf(&s, ", %d more before later rounds", b.topUps)
	}
	if len(b.start) == 0 {
		return s.String()
	}
	lo, hi := b.start[0], b.start[0]
	for _, g := range b.start {
		lo.bytes, hi.bytes = min(lo.bytes, g.bytes), max(hi.bytes, g.bytes)
		lo.items, hi.items = min(lo.items, g.items), max(hi.items, g.items)
	}
	fmt.Fprintf(&s, "; at each round's start sidecache_l1_bytes %s MiB (%s %% of the bound), sidecache_l1_items %s",
		span(lo.bytes/(1<<20), hi.bytes/(1<<20), "%.1f"), span(100*lo.bytes/b.max, 100*hi.bytes/b.max, "%.1f"), span(lo.items, hi.items, "%.0f"))
	var fetched, gone float64
	for i, g := range b.end {
		fetched += g.fetched - b.start[i].fetched
		gone += evicted(b.start[i], g)
	}
	if len(b.end) > 0 {
		fmt.Fprintf(&s, "; during the rounds %.0f ids fetched and stored while %.0f entries were evicted or refused admission "+
			"(ids fetched less the growth of sidecache_l1_items)", fetched, gone)
	}
	return s.String()
}

// span is "lo–hi", or "lo" alone when both read the same.
func span(lo, hi float64, format string) string {
	a, b := fmt.Sprintf(format, lo), fmt.Sprintf(format, hi)
	if a == b {
		return a
	}
	return a + "–" + b
}
