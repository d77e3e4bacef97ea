package server_test

import (
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// TestReadyzNamesRefusedWrites: while Redis answers but refuses every
// write (a failed snapshot: MISCONF; a master short of
// min-replicas-to-write: NOREPLICAS), /readyz stays 200 and names L2
// degraded, "writes refused" (SPEC: Redis down or slow, /readyz stays
// ready and reports L2 as degraded), and sidecache_l2_writes_refused says
// 1 while sidecache_l2_up stays 1 (Redis answers: reads go on, PUBLISH
// too). It said "up": PING passes and an error reply is no outage, so the
// breaker stays closed, while nothing is stored in L2 and no epoch is
// raised. Once Redis takes writes again, the probe's write sees it and
// /readyz says "up", with no write of the sidecar's own to show it.
//
// Both with a write of the replica's own, whose epoch raise is refused,
// and idle (a pod whose every read is a hit): the idle one learns it from
// its probe, which tries a write when none was taken within its interval.
// It said "up" for as long as it wrote nothing: PING and the heartbeats
// (TIME, PUBLISH) passing, only a refused write of its own told it.
func TestReadyzNamesRefusedWrites(t *testing.T) {
	for _, tc := range writeRefusals {
		for _, idle := range []bool{false, true} {
			name := tc.name + "/a write of its own"
			if idle {
				name = tc.name + "/idle"
			}
			t.Run(name, func(t *testing.T) {
				rs := redistest.Start(t, tc.args...)
				o := newOrigin(t)
				r := startReplica(t, o.URL, l2Block(false, rs.Addr()))
				rc := rawClient(t, rs.Addr())
				eventually(t, 10*time.Second, "l2 up", func() bool { return readyzBody(t, r)["l2"] == "up" })
				if got := l2Gauges(t, r); got != "up=1 writes_refused=0" {
					t.Fatalf("before: %s, want up=1 writes_refused=0", got)
				}
				undo := tc.refuse(t, rc)
				if !idle {
					if code, _, _ := r.do(t, http.MethodPatch, "/clients/7"); code != http.StatusOK {
						t.Fatalf("PATCH: %d", code)
					}
				}
				eventually(t, 10*time.Second, "/readyz naming L2 degraded, writes refused", func() bool {
					v := readyzBody(t, r) // 200, or it fails the test
					return v["l2"] == "degraded" && v["reason"] == "writes refused" && v["ready"] == true
				})
				if got := l2Gauges(t, r); got != "up=1 writes_refused=1" {
					t.Errorf("writes refused: %s, want up=1 writes_refused=1", got)
				}
				undo()
				eventually(t, 10*time.Second, "/readyz naming L2 up again", func() bool {
					v := readyzBody(t, r)
					_, reason := v["reason"]
					return v["l2"] == "up" && !reason
				})
				if got := l2Gauges(t, r); got != "up=1 writes_refused=0" {
					t.Errorf("after: %s, want up=1 writes_refused=0", got)
				}
			})
		}
	}
}

var l2Gauge = regexp.MustCompile(`(?m)^sidecache_l2_(up|writes_refused) (\S+)$`)

// l2Gauges reads sidecache_l2_up and sidecache_l2_writes_refused off r's
// /metrics ("-" for one absent).
func l2Gauges(t *testing.T, r *replica) string {
	t.Helper()
	_, _, m := r.do(t, http.MethodGet, "admin:/metrics")
	got := map[string]string{"up": "-", "writes_refused": "-"}
	for _, g := range l2Gauge.FindAllStringSubmatch(m, -1) {
		got[g[1]] = g[2]
	}
	return "up=" + got["up"] + " writes_refused=" + got["writes_refused"]
}
