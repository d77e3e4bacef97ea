package main

import (
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"testing"
)

func TestRuntimeDefaults(t *testing.T) {
	const gib = 1 << 30
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(p string) ([]byte, error) {
			if v, ok := m[p]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	for _, tc := range []struct {
		name  string
		env   map[string]string
		files map[string]string
		want  runtimeSettings
	}{
		{"cgroup v2 limit", nil, map[string]string{"/sys/fs/cgroup/memory.max": "1073741824\n"},
			runtimeSettings{percent: sidecarGCPercent, memLimit: gib / 10 * 9, procs: sidecarProcs}},
		{"cgroup v1 limit", nil, map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n"},
			runtimeSettings{percent: sidecarGCPercent, memLimit: gib / 10 * 9, procs: sidecarProcs}},
		{"cgroup v2 unlimited", nil, map[string]string{"/sys/fs/cgroup/memory.max": "max\n"}, runtimeSettings{procs: sidecarProcs}},
		{"cgroup v1 unlimited", nil, map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, runtimeSettings{procs: sidecarProcs}},
		{"no cgroup", nil, nil, runtimeSettings{procs: sidecarProcs}},
		{"operator GOMEMLIMIT", map[string]string{"GOMEMLIMIT": "512MiB"}, map[string]string{"/sys/fs/cgroup/memory.max": "1073741824"},
			runtimeSettings{percent: sidecarGCPercent, procs: sidecarProcs}},
		{"operator GOMEMLIMIT off", map[string]string{"GOMEMLIMIT": "off"}, map[string]string{"/sys/fs/cgroup/memory.max": "1073741824"}, runtimeSettings{procs: sidecarProcs}},
		{"operator GOGC", map[string]string{"GOGC": "100"}, map[string]string{"/sys/fs/cgroup/memory.max": "1073741824"},
			runtimeSettings{memLimit: gib / 10 * 9, procs: sidecarProcs}},
		{"operator GOMAXPROCS", map[string]string{"GOMAXPROCS": "4"}, nil, runtimeSettings{}},
		{"operator GOMAXPROCS=0 keeps Go's default", map[string]string{"GOMAXPROCS": "0"}, nil, runtimeSettings{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runtimeDefaults(func(k string) string { return tc.env[k] }, files(tc.files))
			if got != tc.want {
				t.Errorf("runtimeDefaults = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestGOMAXPROCSDefault runs the binary: one P unless the operator sets
// GOMAXPROCS, read back from the Go collector's gauge on /metrics.
func TestGOMAXPROCSDefault(t *testing.T) {
	_, demoURL := startDemo(t)
	cfg := writeFile(t, filepath.Join(t.TempDir(), "sidecache.yaml"), fmt.Sprintf(configTmpl, demoURL, "1m"))
	for _, tc := range []struct {
		name string
		env  []string
		want float64
	}{
		{"unset", []string{"GOMAXPROCS="}, sidecarProcs},
		{"operator's", []string{"GOMAXPROCS=3"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProcEnv(t, "sidecache", bins.sidecache, tc.env, "-config", cfg)
			m := p.waitOutput(scListening)
			sc := &sidecache{proc: p, proxy: m[1], admin: m[2]}
			if got := sc.metricValue(t, "go_sched_gomaxprocs_threads"); got != tc.want {
				t.Errorf("go_sched_gomaxprocs_threads = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRuntimeLine (issue 22, item 8): the start-up line says "none" for
// an unset memory limit, not math.MaxInt64, and whether and where traces go.
func TestRuntimeLine(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	attrs := func(a []any) map[string]any {
		out := map[string]any{}
		for i := 0; i+1 < len(a); i += 2 {
			out[a[i].(string)] = a[i+1]
		}
		return out
	}
	got := attrs(runtimeAttrs(1, math.MaxInt64, env(nil)))
	if got["memory_limit"] != "none" || got["tracing"] != "off" || got["gomaxprocs"] != 1 {
		t.Errorf("no limit, no tracing: %v", got)
	}
	got = attrs(runtimeAttrs(2, 900<<20, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"})))
	if got["memory_limit"] != int64(900<<20) || got["tracing"] != "otlp http://collector:4318/v1/traces" {
		t.Errorf("limit and tracing on: %v", got)
	}
}
