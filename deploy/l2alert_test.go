package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// TestL2DownAlertSilentWithoutL2 evaluates the shipped SidecacheL2Down
// expression, as promtool test rules would, against what a real sidecar
// exports: silent on a pod configured without Redis (it used to export
// sidecache_l2_up 0 and fire on every such pod), firing on one whose Redis
// is unreachable.
func TestL2DownAlertSilentWithoutL2(t *testing.T) {
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(data, &rf); err != nil {
		t.Fatal(err)
	}
	var expr string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "SidecacheL2Down" {
				expr = r.Expr
			}
		}
	}
	e, err := promql(expr)
	if err != nil {
		t.Fatal(err)
	}
	// The rule is a comparison of one selector with a number; evaluate
	// that shape, and fail loudly if the rule changes shape.
	be, ok := e.(*parser.BinaryExpr)
	vs, okL := be.LHS.(*parser.VectorSelector)
	num, okR := be.RHS.(*parser.NumberLiteral)
	if !ok || !okL || !okR || be.Op != parser.EQLC {
		t.Fatalf("SidecacheL2Down is %q; this test evaluates `selector == number` only", expr)
	}
	bin := buildSidecache(t)
	firing := func(l2 string) int {
		n := 0
		for _, s := range scrapeSidecar(t, bin, l2) {
			if selects(vs, s) && s.value == num.Val {
				n++
			}
		}
		return n
	}
	if n := firing(""); n != 0 {
		t.Errorf("SidecacheL2Down fires (%d series) on a pod without L2", n)
	}
	// Port 1 refuses connections: Redis is configured and down.
	if n := firing("  l2:\n    redis:\n      addrs: [\"127.0.0.1:1\"]\n"); n != 1 {
		t.Errorf("SidecacheL2Down selects %d series on a pod whose Redis is down, want 1", n)
	}
}

// scrapeSidecar runs the sidecache binary with the given cache.l2 block
// and returns its /metrics.
func scrapeSidecar(t *testing.T, bin, l2 string) []liveSample {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "sidecache.yaml")
	y := fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstream: {url: "http://127.0.0.1:1"}
cache:
  l1: {max_bytes: 1MiB}
%s
routes:
  - {name: r, path: /r, ttl: 1m}
`, l2)
	if err := os.WriteFile(cfg, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return startLive(t, bin, cfg, "sidecache").scrape(t)
}
