package lab

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sidecache/sidecache/bench/internal/resp"
	"github.com/sidecache/sidecache/internal/redistest"
)

// TestL2ReadCmds: the l2 row's MGET reference is the command an L2 hit
// sends for the entries a replica stored: MGET of the entry key, then the
// epoch key of each tag of its header, in the header's order; it reads
// only entries. The entries are written as internal/cache/l2 writes them
// (epoch.go, encodeValue: "sc2 <ms>", a tag a line, an empty line, the
// payload; the bench module does not build that package).
func TestL2ReadCmds(t *testing.T) {
	rs := redistest.Start(t)
	ctx := context.Background()
	const prefix = "bench-l2-reader:"
	tags := map[string][]string{
		"GET h/clients/1": {"_route:client", "client:1", "_uri:/clients/1"},
		"GET h/clients/2": {"_route:client", "client:2", "_uri:/clients/2"},
		"GET h/self":      {"_route:self", "_uri:/self"},
	}
	for k, tt := range tags {
		v := "sc2 1795665895890\n" + strings.Join(tt, "\n") + "\n\n\x00payload\nwith lines\n"
		if _, err := resp.Do(ctx, rs.Addr(), "SET", prefix+"e:"+k, v); err != nil {
			t.Fatal(err)
		}
		for _, tag := range tt {
			if _, err := resp.Do(ctx, rs.Addr(), "SET", prefix+"v:"+tag, "0"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := resp.Do(ctx, rs.Addr(), "SET", prefix+"l:GET h/clients/1", "token"); err != nil { // not an entry
		t.Fatal(err)
	}

	cmds, err := l2ReadCmds(ctx, rs.Addr(), prefix, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != len(tags) {
		t.Fatalf("%d commands for %d entries: %q", len(cmds), len(tags), cmds)
	}
	for _, cmd := range cmds {
		key := cmd[1][len(prefix+"e:"):]
		want := []string{"MGET", prefix + "e:" + key}
		for _, tag := range tags[key] {
			want = append(want, prefix+"v:"+tag)
		}
		if !slices.Equal(cmd, want) {
			t.Errorf("got %q, want %q", cmd, want)
		}
		v, err := resp.Do(ctx, rs.Addr(), cmd...)
		vals, _ := v.([]any)
		if err != nil || len(vals) != len(cmd)-1 || slices.Contains(vals, nil) {
			t.Errorf("%q answered %q (%v): want every key present", cmd, v, err)
		}
	}
	if cmds, err := l2ReadCmds(ctx, rs.Addr(), prefix, 2); err != nil || len(cmds) != 2 {
		t.Errorf("n = 2: %d commands (%v)", len(cmds), err)
	}
	if _, err := l2ReadCmds(ctx, rs.Addr(), "other:", 10); err == nil {
		t.Error("no entry under the prefix: no error")
	}
}
