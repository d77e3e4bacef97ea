package proxy_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/proxy"
)

// An element of a bulk answer is kept only if its body and its header
// block together fit max_body_bytes, as a per-ID answer: the header its
// elements share is measured once per answer (admit.Heard.HeaderBytes),
// and still counts for each. A 600-byte header field and a 10-byte
// element over a 500-byte bound: the element is served, not kept, and the
// next request for it makes a bulk call again; under a large bound it is
// kept.
func TestBatchElementHeaderCountsAgainstMaxBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		maxBody int64
		calls   int
	}{{500, 2}, {1 << 20, 1}} {
		o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Pad", strings.Repeat("p", 600))
			_, _ = w.Write([]byte(`[{"id":"` + ids[0] + `"}]`))
		})
		e := newEnv(t, o.upstream, []testRoute{userRoute(10, time.Millisecond)}, func(opts *proxy.Options, _ *l1.Store) {
			opts.MaxBodyBytes = tc.maxBody
		})
		for range 2 {
			if resp, body := e.do(http.MethodGet, "/users/1", nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"1"`) {
				t.Fatalf("max_body_bytes %d: %d %q", tc.maxBody, resp.StatusCode, body)
			}
			e.l1.Wait()
		}
		if got := len(o.snapshot()); got != tc.calls {
			t.Errorf("max_body_bytes %d: %d bulk calls for two requests of one id, want %d", tc.maxBody, got, tc.calls)
		}
	}
}
