package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
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
		return readyzBody(t, r)
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

// TestReadyzAfterGapNamesTheFloor: after the subscription is lost and
// rebuilt, the cache serves an entry older than max_lag only if it was
// fetched after the new subscription was confirmed (l2's Floor). Until
// max_lag has passed since then, every entry the cache holds is either
// younger than max_lag or refused: it serves exactly what an unproven
// replica serves, so /readyz says "unproven" (and stays ready), however
// fresh the heartbeat proof; it names the floor; and once max_lag has
// passed it says "proven" again. The old answer was "proven" while the
// replica refused an entry older than max_lag.
func TestReadyzAfterGapNamesTheFloor(t *testing.T) {
	rs := redistest.Start(t)
	o := newOrigin(t)
	const maxLag = 3 * time.Second
	r := startReplicaYAML(t, fmt.Sprintf(baseConfig, o.URL, l2Block(false, rs.Addr()))+"coherence: {max_lag: 3s}\n")
	readyz := func() map[string]any {
		t.Helper()
		return readyzBody(t, r)
	}
	rc := rawClient(t, rs.Addr())
	// A loaded machine may take longer than max_lag between the kill and
	// the answer that is checked; then nothing can be concluded and the
	// gap is made again.
	for attempt := 1; ; attempt++ {
		eventually(t, 20*time.Second, "coherence proven", func() bool { return readyz()["coherence"] == "proven" })
		// An entry older than max_lag, served under the proof.
		r.get(t, "/clients/1")
		eventually(t, 20*time.Second, "an L1 hit older than max_lag", func() bool {
			code, h, _ := r.do(t, http.MethodGet, "/clients/1")
			age, _ := strconv.Atoi(h.Get("Age"))
			return code == 200 && strings.Contains(h.Get("Cache-Status"), "; hit") && time.Duration(age)*time.Second > maxLag
		})
		peer := metric(t, r, "sidecache_invalidations_total", `source="peer"`)
		killed := time.Now()
		if err := rc.Do(context.Background(), "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "resubscribed", func() bool {
			return metric(t, r, "sidecache_invalidations_total", `source="peer"`) > peer
		})
		_, cs := r.get(t, "/clients/1")
		v := readyz()
		answered := time.Now()
		if answered.After(killed.Add(maxLag)) {
			if attempt == 3 {
				t.Fatalf("three gaps, each checked more than max_lag after it")
			}
			continue
		}
		if strings.Contains(cs, "; hit") {
			t.Fatalf("the entry fetched before the gap and older than max_lag was served: %q", cs)
		}
		if v["coherence"] != "unproven" || v["ready"] != true {
			t.Fatalf("/readyz %v while the cache refuses entries older than max_lag fetched before the gap: want coherence unproven, ready", v)
		}
		floor, err := time.Parse(time.RFC3339Nano, fmt.Sprint(v["coherence_floor"]))
		if err != nil || floor.Before(killed) || floor.After(answered) {
			t.Fatalf("coherence_floor %v (%v): want the time of the resubscription, between %v and %v", v["coherence_floor"], err, killed, answered)
		}
		break
	}
	eventually(t, 20*time.Second, "coherence proven again", func() bool {
		v := readyz()
		return v["coherence"] == "proven" && v["coherence_floor"] != nil
	})
}

// readyzBody is r's GET /readyz, which must answer 200 with a JSON object.
func readyzBody(t *testing.T, r *replica) map[string]any {
	t.Helper()
	code, _, b := r.do(t, http.MethodGet, "admin:/readyz")
	var v map[string]any
	if err := json.Unmarshal([]byte(b), &v); err != nil || code != http.StatusOK {
		t.Fatalf("/readyz: %d %q", code, b)
	}
	return v
}
