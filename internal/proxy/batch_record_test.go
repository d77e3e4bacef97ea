package proxy_test

import (
	"net/http"
	"testing"
	"time"
)

// A batched miss's access record names the bulk call that answered it:
// its X-Request-Id (what the upstream's log holds) and a share of its time.
func TestBatchedMissRecordsBulkCall(t *testing.T) {
	o := newBulkOrigin(t, usersAnswer(func(string) bool { return true }))
	e := newEnv(t, o.upstream, []testRoute{userRoute(100, time.Millisecond)})
	front, rec := recordedFront(t, e)
	resp, _ := getWith(t, client, front.URL+userPaths(1, 1)[0], nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	calls := o.snapshot()
	if len(calls) != 1 {
		t.Fatalf("%d bulk calls, want 1", len(calls))
	}
	if sent := calls[0].header.Get("X-Request-Id"); sent == "" || (*rec).UpstreamRequestID != sent {
		t.Errorf("access record holds upstream request id %q, want the bulk call's %q", (*rec).UpstreamRequestID, sent)
	}
	if (*rec).Upstream <= 0 {
		t.Errorf("access record's upstream time %v, want the id's share of the call's", (*rec).Upstream)
	}
}
