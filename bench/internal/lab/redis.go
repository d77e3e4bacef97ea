package lab

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sidecache/sidecache/bench/internal/resp"
)

// redisCPU is Redis's own CPU time so far, user + system over all its
// threads, from INFO cpu (used_cpu_sys, used_cpu_user: seconds with
// microsecond precision).
func redisCPU(ctx context.Context, addr string) (time.Duration, error) {
	c, err := resp.Dial(ctx, addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	v, err := c.Do("INFO", "cpu")
	if err != nil {
		return 0, err
	}
	info, _ := v.(string)
	return parseRedisCPU(info)
}

func parseRedisCPU(info string) (time.Duration, error) {
	var total float64
	n := 0
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || k != "used_cpu_sys" && k != "used_cpu_user" {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %s: %w", k, err)
		}
		total += f
		n++
	}
	if n != 2 {
		return 0, errors.New("INFO cpu lacks used_cpu_sys or used_cpu_user")
	}
	return time.Duration(total * float64(time.Second)), nil
}

// meanValueSize is the mean length of up to 50 values whose keys match
// pattern: the size the plain-GET reference stores, so both read the same
// bytes.
func meanValueSize(ctx context.Context, addr, pattern string) (int, error) {
	c, err := resp.Dial(ctx, addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var keys []string
	for cursor := "0"; len(keys) < 50; {
		v, err := c.Do("SCAN", cursor, "MATCH", pattern, "COUNT", "1000")
		if err != nil {
			return 0, err
		}
		a, _ := v.([]any)
		if len(a) != 2 {
			return 0, errors.New("SCAN: unexpected reply")
		}
		for _, k := range a[1].([]any) {
			keys = append(keys, k.(string))
		}
		if cursor = a[0].(string); cursor == "0" {
			break
		}
	}
	if len(keys) == 0 {
		return 0, fmt.Errorf("no key matches %s", pattern)
	}
	total := 0
	for _, k := range keys[:min(len(keys), 50)] {
		v, err := c.Do("STRLEN", k)
		if err != nil {
			return 0, err
		}
		n, _ := v.(int64)
		total += int(n)
	}
	return total / min(len(keys), 50), nil
}

// pacedGets issues GET of keys (round robin) at rate per second for d,
// spread over conns connections, each waiting for its reply before its
// next command: a plain client at the same open-loop rate as the HTTP
// cells. Each GET is released at its own instant, start + i/rate, as
// vegeta releases each request of the sidecar's rows, so the commands
// reach Redis spread out as the sidecar's MGETs do and Redis pays an
// event-loop wake-up per command; with batched, a 1 ms ticker releases
// what fell due since its last tick at once (this bench's reference until
// 2026-11-25), so commands arriving together share Redis's wake-ups and
// cost it less each. It returns the replies that held a value and the
// failures.
func pacedGets(ctx context.Context, addr string, keys []string, rate, conns int, d time.Duration, batched bool) (ok, failed int, err error) {
	return pacedCmds(ctx, addr, func(i int) []string { return []string{"GET", keys[i%len(keys)]} }, rate, conns, d, batched)
}

// pacedCmds is pacedGets with command i given by cmd.
func pacedCmds(ctx context.Context, addr string, cmd func(i int) []string, rate, conns int, d time.Duration, batched bool) (ok, failed int, err error) {
	var cs []*resp.Conn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range conns {
		c, err := resp.Dial(ctx, addr)
		if err != nil {
			return 0, 0, err
		}
		cs = append(cs, c)
	}
	tokens := make(chan int, rate) // a second's worth: lateness queues here, as vegeta's does
	total := int(d.Seconds() * float64(rate))
	if batched {
		go releaseBatched(ctx, tokens, rate, total)
	} else {
		go releaseEach(ctx, tokens, rate, total)
	}
	var nOK, nFail atomic.Int64
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			for k := range tokens {
				if v, err := c.Do(cmd(k)...); err == nil && v != nil {
					nOK.Add(1)
				} else {
					nFail.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(nOK.Load()), int(nFail.Load()), ctx.Err()
}

// releaseEach sends token i at start + i/rate, each at its own instant (a
// late one at once, as vegeta's pacer catches up).
func releaseEach(ctx context.Context, tokens chan<- int, rate, total int) {
	defer close(tokens)
	start := time.Now()
	for i := range total {
		if wait := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		tokens <- i
	}
}

// releaseBatched sends, on each tick of a 1 ms ticker, every token that
// fell due since the last.
func releaseBatched(ctx context.Context, tokens chan<- int, rate, total int) {
	defer close(tokens)
	start, sent := time.Now(), 0
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for sent < total {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			due := min(total, int(now.Sub(start).Seconds()*float64(rate)))
			for ; sent < due; sent++ {
				tokens <- sent
			}
		}
	}
}

// l2ReadCmds are the MGETs an L2 hit sends (internal/cache/l2 fastread.go:
// the entry key, then the epoch key of each tag its header names), for up
// to n entries whose keys start with prefix+"e:": the L2 hit's own command
// issued from a loop, so that its Redis cost can be told from the serving
// conditions'. The header is the entry's first lines: "sc2 <time>", one
// tag a line, an empty line.
func l2ReadCmds(ctx context.Context, addr, prefix string, n int) ([][]string, error) {
	c, err := resp.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var out [][]string
	for cursor := "0"; len(out) < n; {
		v, err := c.Do("SCAN", cursor, "MATCH", prefix+"e:*", "COUNT", "1000")
		if err != nil {
			return nil, err
		}
		a, _ := v.([]any)
		if len(a) != 2 {
			return nil, errors.New("SCAN: unexpected reply")
		}
		for _, k := range a[1].([]any) {
			if len(out) == n {
				break
			}
			key := k.(string)
			v, err := c.Do("GET", key)
			if err != nil {
				return nil, err
			}
			b, _ := v.(string)
			first, rest, ok := strings.Cut(b, "\n")
			if !ok || !strings.HasPrefix(first, "sc2 ") {
				return nil, fmt.Errorf("%s: not an L2 entry's header", key)
			}
			cmd := []string{"MGET", key}
			for {
				var tag string
				if tag, rest, ok = strings.Cut(rest, "\n"); !ok {
					return nil, fmt.Errorf("%s: header without its end", key)
				}
				if tag == "" {
					break
				}
				cmd = append(cmd, prefix+"v:"+tag)
			}
			out = append(out, cmd)
		}
		if cursor = a[0].(string); cursor == "0" {
			break
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no key matches %se:*", prefix)
	}
	return out, nil
}
