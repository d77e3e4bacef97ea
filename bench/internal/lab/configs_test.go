package lab

import (
	"io"
	"strings"
	"testing"

	"github.com/sidecache/sidecache/internal/config"
)

// The generated configurations must pass the sidecar's own loader, so a
// bench run never dies on a config the bench wrote.
func TestSidecarYAMLValid(t *testing.T) {
	ports := sidecarPorts{listen: "127.0.0.1:18080", admin: "127.0.0.1:19090", upstream: "127.0.0.1:13000", redis: "127.0.0.1:16379"}
	tests := []struct {
		mode             string
		redis            string
		routes           int
		l2, batch, split bool
		l1               int64
	}{
		{"pass", "", 0, false, false, false, 0},
		{"cache", ports.redis, 7, true, false, false, 256 << 20},
		{"cache", "", 7, false, false, false, 256 << 20},
		{"hit", "", 7, false, false, false, 256 << 20}, // the L1 hit of the CPU and peers tables
		{"batch", "", 7, false, true, true, 64 << 20},
		{"cache+batch", ports.redis, 7, true, true, true, 256 << 20},
		{"cache+batch", "", 7, false, true, true, 256 << 20},          // the CPU table's batched miss and split
		{"cache+batch-bound", "", 7, false, true, true, BoundL1Bytes}, // the batched miss with L1 at its bound
		{"l2-reader", ports.redis, 7, true, false, false, 0},          // the CPU table's L2 hit
	}
	for _, tc := range tests {
		t.Run(tc.mode+"/"+tc.redis, func(t *testing.T) {
			p := ports
			p.redis = tc.redis
			y, err := sidecarYAML(tc.mode, p)
			if err != nil {
				t.Fatal(err)
			}
			c, err := config.Parse([]byte(y), tc.mode+".yaml")
			if err != nil {
				t.Fatalf("config rejected:\n%v\n---\n%s", err, y)
			}
			if len(c.Routes) != tc.routes || (c.Cache.L2 != nil) != tc.l2 || int64(c.Cache.L1.MaxBytes) != tc.l1 {
				t.Errorf("routes %d, l2 %v, l1 %d; want %d, %v, %d", len(c.Routes), c.Cache.L2 != nil, c.Cache.L1.MaxBytes, tc.routes, tc.l2, tc.l1)
			}
			var batch, split bool
			for _, r := range c.Routes {
				batch = batch || r.Batch != nil
				split = split || r.Split != nil
			}
			if batch != tc.batch || split != tc.split {
				t.Errorf("batch %v split %v, want %v %v", batch, split, tc.batch, tc.split)
			}
			if c.Upstream.URL != "http://"+p.upstream || c.Listen != p.listen || c.Admin.Token != sidecarAdminToken {
				t.Errorf("addresses: %+v %+v", c.Upstream, c.Admin)
			}
		})
	}
	if _, err := sidecarYAML("nope", ports); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown mode: %v", err)
	}
}

// -print-config writes what the bench would run, on the hand-run ports.
func TestPrintConfig(t *testing.T) {
	for _, mode := range []string{"pass", "batch", "cache+batch"} {
		var b strings.Builder
		if err := PrintConfig(&b, mode); err != nil {
			t.Fatal(err)
		}
		c, err := config.Parse([]byte(b.String()), mode+".yaml")
		if err != nil {
			t.Fatalf("%s rejected: %v", mode, err)
		}
		if c.Listen != "127.0.0.1:8080" || c.Upstream.URL != "http://127.0.0.1:3000" || (c.Cache.L2 != nil) != (mode == "cache+batch") {
			t.Errorf("%s: listen %s upstream %s l2 %v", mode, c.Listen, c.Upstream.URL, c.Cache.L2 != nil)
		}
	}
	if err := PrintConfig(io.Discard, "direct"); err == nil {
		t.Error("direct has no sidecar config, yet one was printed")
	}
}
