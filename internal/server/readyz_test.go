package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// TestRedisTroubleVisible (issue 22, item 7): with Redis gone, /readyz
// still says ready but names the unproven coherence, and every stored
// entry the coherence bound refuses is counted in
// sidecache_coherence_refused_total — the cost of the choice of
// coherence.max_lag is visible.
func TestRedisTroubleVisible(t *testing.T) {
	rs := redistest.Start(t)
	o := newOrigin(t)
	r := startReplicaYAML(t, fmt.Sprintf(baseConfig, o.URL, l2Block(false, rs.Addr()))+"coherence: {max_lag: 300ms}\n")
	readyz := func() map[string]any {
		t.Helper()
		code, _, b := r.do(t, http.MethodGet, "admin:/readyz")
		var v map[string]any
		if err := json.Unmarshal([]byte(b), &v); err != nil || code != http.StatusOK {
			t.Fatalf("/readyz: %d %q", code, b)
		}
		return v
	}
	refused := func() string {
		t.Helper()
		for _, s := range scrapeSeries(t, r.admin+"/metrics") {
			if strings.HasPrefix(s, `sidecache_coherence_refused_total{tier="l1"} `) {
				return strings.TrimPrefix(s, `sidecache_coherence_refused_total{tier="l1"} `)
			}
		}
		return "absent"
	}

	eventually(t, 5*time.Second, "coherence proven", func() bool { return readyz()["coherence"] == "proven" })
	if got := refused(); got != "0" {
		t.Fatalf("refused before any trouble: %s, want 0 (the series exists with L2)", got)
	}
	r.get(t, "/clients/1")
	eventually(t, 5*time.Second, "an L1 hit", func() bool {
		_, cs := r.get(t, "/clients/1")
		return strings.Contains(cs, "; hit")
	})

	rs.Kill()
	eventually(t, 10*time.Second, "/readyz names the unproven coherence", func() bool {
		v := readyz()
		return v["coherence"] == "unproven" && v["ready"] == true
	})
	eventually(t, 10*time.Second, "the cached entry refused and counted", func() bool {
		_, cs := r.get(t, "/clients/1")
		return !strings.Contains(cs, "; hit") && refused() != "0"
	})
}
