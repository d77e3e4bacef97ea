package main

import (
	"io/fs"
	"testing"
)

func TestGCDefaults(t *testing.T) {
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
		want  gcSettings
	}{
		{"cgroup v2 limit", nil, map[string]string{"/sys/fs/cgroup/memory.max": "1073741824\n"},
			gcSettings{percent: sidecarGCPercent, memLimit: gib / 10 * 9}},
		{"cgroup v1 limit", nil, map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n"},
			gcSettings{percent: sidecarGCPercent, memLimit: gib / 10 * 9}},
		{"cgroup v2 unlimited", nil, map[string]string{"/sys/fs/cgroup/memory.max": "max\n"}, gcSettings{}},
		{"cgroup v1 unlimited", nil, map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, gcSettings{}},
		{"no cgroup", nil, nil, gcSettings{}},
		{"operator GOMEMLIMIT", map[string]string{"GOMEMLIMIT": "512MiB"}, map[string]string{"/sys/fs/cgroup/memory.max": "1073741824"},
			gcSettings{percent: sidecarGCPercent}},
		{"operator GOMEMLIMIT off", map[string]string{"GOMEMLIMIT": "off"}, map[string]string{"/sys/fs/cgroup/memory.max": "1073741824"}, gcSettings{}},
		{"operator GOGC", map[string]string{"GOGC": "100"}, map[string]string{"/sys/fs/cgroup/memory.max": "1073741824"},
			gcSettings{memLimit: gib / 10 * 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := gcDefaults(func(k string) string { return tc.env[k] }, files(tc.files))
			if got != tc.want {
				t.Errorf("gcDefaults = %+v, want %+v", got, tc.want)
			}
		})
	}
}
