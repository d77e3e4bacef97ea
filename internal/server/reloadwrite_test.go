package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// writeRuleConfig is a summary route tagged client:{id} under another URI
// than the write's, and, when rule is set, the write route whose rule
// drops that tag.
func writeRuleConfig(upstream string, rule bool) string {
	c := fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token: secret}
upstream: {url: %s, timeout: 5s}
cache:
  l1: {max_bytes: 16MiB}
routes:
  - name: summary
    path: /clients/{id}/summary
    ttl: 5m
    tags: ["client:{id}"]
`, upstream)
	if rule {
		c += `  - name: client-write
    methods: [PATCH]
    path: /clients/{id}
    invalidate: ["client:{id}"]
`
	}
	return c
}

// TestWriteInFlightAcrossReloadThatGainsItsRule: a write is at the
// upstream when a reload regains the invalidate rule its path falls
// under (a file applied half written, then whole; a mistake undone). The
// reload drops what the rule covers (retire.go), but a read after it
// fetches the summary before the upstream applies the write and stores
// that version, tagged client:1. The write's answer must drop it: its
// invalidation adds what the table in force when it is answered
// invalidates. Planned under the table it arrived under alone, it
// dropped its URI only, and the summary read after the acknowledged
// write was the version it replaced, until its TTL.
func TestWriteInFlightAcrossReloadThatGainsItsRule(t *testing.T) {
	var ver atomic.Int64
	arrived, hold := make(chan struct{}, 1), make(chan struct{})
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch {
			arrived <- struct{}{}
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
			ver.Add(1) // applied, then answered
			fmt.Fprint(w, "ok")
			return
		}
		fmt.Fprintf(w, "summary-v%d", ver.Load())
	}))
	t.Cleanup(o.Close)
	fc := startFromFileYAML(t, writeRuleConfig(o.URL, false))

	wrote := make(chan int, 1)
	go func() {
		code, _, _, err := fc.try(http.MethodPatch, "/clients/1")
		if err != nil {
			t.Error(err)
		}
		wrote <- code
	}()
	<-arrived
	if err := fc.rewrite(t, writeRuleConfig(o.URL, true)); err != nil {
		t.Fatal(err)
	}
	if b, cs := fc.get(t, "/clients/1/summary"); b != "summary-v0" || !strings.Contains(cs, "stored") {
		t.Fatalf("summary before the write is applied: %q (%s), want summary-v0 stored", b, cs)
	}
	close(hold)
	if code := <-wrote; code != http.StatusOK {
		t.Fatalf("PATCH: %d", code)
	}
	if b, cs := fc.get(t, "/clients/1/summary"); b != "summary-v1" {
		t.Fatalf("summary after the acknowledged write: %q (%s), want summary-v1", b, cs)
	}
}
