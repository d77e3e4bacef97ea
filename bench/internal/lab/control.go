package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// httpDo is one control call (reset, counts, purge, readiness, prefill),
// bounded to 10s.
func httpDo(ctx context.Context, method, url string, hdr http.Header) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// httpStatus is a ready check: url answers with one of the statuses.
func httpStatus(url string, want ...int) func(context.Context) error {
	return func(ctx context.Context) error {
		code, body, err := httpDo(ctx, "GET", url, nil)
		if err != nil {
			return err
		}
		for _, w := range want {
			if code == w {
				return nil
			}
		}
		return fmt.Errorf("GET %s: %d %s", url, code, bytes.TrimSpace(body))
	}
}

// demoClient talks to the demo upstream's own control endpoints, never
// through a proxy.
type demoClient struct{ base string }

func (d demoClient) counts(ctx context.Context) (map[string]int64, error) {
	code, body, err := httpDo(ctx, "GET", d.base+"/_demo/counts", nil)
	if err != nil {
		return nil, fmt.Errorf("demo counts: %w", err)
	}
	if code != 200 {
		return nil, fmt.Errorf("demo counts: status %d", code)
	}
	var m map[string]int64
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("demo counts: %w", err)
	}
	return m, nil
}

func (d demoClient) reset(ctx context.Context) error {
	code, _, err := httpDo(ctx, "POST", d.base+"/_demo/reset", nil)
	if err == nil && code != 204 {
		err = fmt.Errorf("status %d", code)
	}
	if err != nil {
		return fmt.Errorf("demo reset: %w", err)
	}
	return nil
}

// upstreamDelta sums the calls between two count snapshots.
func upstreamDelta(before, after map[string]int64) (total int64, per map[string]int64) {
	per = map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			per[k] = d
			total += d
		}
	}
	return total, per
}

func itoa(i int) string { return strconv.Itoa(i) }
