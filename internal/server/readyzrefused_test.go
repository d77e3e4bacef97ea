package server_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// TestReadyzNamesRefusedWrites: while Redis answers but refuses every
// write (a failed snapshot: MISCONF; a master short of
// min-replicas-to-write: NOREPLICAS), /readyz stays 200 and names L2
// degraded, "writes refused" (SPEC: Redis down or slow, /readyz stays
// ready and reports L2 as degraded). It said "up": PING passes and an
// error reply is no outage, so the breaker stays closed, while nothing is
// stored in L2 and no epoch is raised. Once Redis takes writes again, the
// probe's write sees it and /readyz says "up", with no write of the
// sidecar's own to show it.
func TestReadyzNamesRefusedWrites(t *testing.T) {
	for _, tc := range writeRefusals {
		t.Run(tc.name, func(t *testing.T) {
			rs := redistest.Start(t, tc.args...)
			o := newOrigin(t)
			r := startReplica(t, o.URL, l2Block(false, rs.Addr()))
			rc := rawClient(t, rs.Addr())
			eventually(t, 10*time.Second, "l2 up", func() bool { return readyzBody(t, r)["l2"] == "up" })
			undo := tc.refuse(t, rc)
			// A write: its epoch raise is refused.
			if code, _, _ := r.do(t, http.MethodPatch, "/clients/7"); code != http.StatusOK {
				t.Fatalf("PATCH: %d", code)
			}
			eventually(t, 10*time.Second, "/readyz naming L2 degraded, writes refused", func() bool {
				v := readyzBody(t, r) // 200, or it fails the test
				return v["l2"] == "degraded" && v["reason"] == "writes refused" && v["ready"] == true
			})
			undo()
			eventually(t, 10*time.Second, "/readyz naming L2 up again", func() bool {
				v := readyzBody(t, r)
				_, reason := v["reason"]
				return v["l2"] == "up" && !reason
			})
		})
	}
}
