package lab

import (
	"context"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		pid        int
		want       procStat
		ok         bool
	}{
		{"plain", "4242 (nginx) S 4240 4240 1 0 -1 4194624 10 0 0 0 17 5 0 0 20 0 1 0 100 0 0", 4242, procStat{ppid: 4240, ticks: 22}, true},
		{"comm with spaces and parens", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 300 200 0 0 20 0 1 0 1 0 0", 7, procStat{ppid: 1, ticks: 500}, true},
		{"truncated", "7 (x) R 1 7", 0, procStat{}, false},
		{"garbage", "not a stat line", 0, procStat{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid, st, ok := parseStat(tc.line)
			if ok != tc.ok || pid != tc.pid || st != tc.want {
				t.Errorf("parseStat = %d %+v %v, want %d %+v %v", pid, st, ok, tc.pid, tc.want, tc.ok)
			}
		})
	}
}

// cpuTime of this process is read from /proc and counts what it used.
func TestCPUTimeOfSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, err := cpuTime([]int{os.Getpid()}); err != nil {
		t.Fatal(err)
	}
}

func TestParseCPUSidecars(t *testing.T) {
	got, err := ParseCPUSidecars("before=bin/a, after=bin/b")
	want := []CPUSidecar{{Name: "before", Bin: "bin/a"}, {Name: "after", Bin: "bin/b"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParseCPUSidecars = %v, %v", got, err)
	}
	got, err = ParseCPUSidecars("pod=bin/a GOMEMLIMIT=241591910 GOGC=400")
	want = []CPUSidecar{{Name: "pod", Bin: "bin/a", Env: []string{"GOMEMLIMIT=241591910", "GOGC=400"}}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParseCPUSidecars with env = %v, %v", got, err)
	}
	for _, bad := range []string{"nobin", "x=", "x= ", "x=bin/a NOEQUALS", "x=bin/a =v"} {
		if _, err := ParseCPUSidecars(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

func TestParseRedisCPU(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.250000\r\nused_cpu_sys_children:9.000000\r\n"
	got, err := parseRedisCPU(info)
	if err != nil || got != 1750*time.Millisecond {
		t.Errorf("parseRedisCPU = %v, %v; want 1.75s", got, err)
	}
	if _, err := parseRedisCPU("# CPU\r\nused_cpu_sys:1.0\r\n"); err == nil {
		t.Error("INFO without used_cpu_user accepted")
	}
}

// splitPath: the first half of the ids are warm keys, the rest cold ids
// never handed out before, all distinct.
func TestSplitPath(t *testing.T) {
	cold := newColdIDs(100)
	seen := map[string]bool{}
	for range 50 {
		ids := strings.Split(strings.TrimPrefix(splitPath(20, 100, cold), "/users?ids="), ",")
		if len(ids) != 20 {
			t.Fatalf("%d ids, want 20", len(ids))
		}
		for i, id := range ids {
			n, err := strconv.Atoi(id)
			if err != nil || i < 10 && (n < 1 || n > 100) || i >= 10 && n <= 100 {
				t.Fatalf("id %d = %q", i, id)
			}
			if i >= 10 {
				if seen[id] {
					t.Fatalf("cold id %s handed out twice", id)
				}
				seen[id] = true
			}
		}
	}
}

// TestReleaseEach: the per-command pacer releases every token, in order,
// one at a time; a cancelled context ends it early and closes the channel.
func TestReleaseEach(t *testing.T) {
	tokens := make(chan int, 1)
	go releaseEach(context.Background(), tokens, 20000, 200)
	want := 0
	for i := range tokens {
		if i != want {
			t.Fatalf("token %d, want %d", i, want)
		}
		want++
	}
	if want != 200 {
		t.Fatalf("%d tokens, want 200", want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tokens = make(chan int, 10)
	releaseEach(ctx, tokens, 1, 10) // token 0 is due at once, 1 a second later
	n := 0
	for range tokens {
		n++
	}
	if n != 1 {
		t.Fatalf("%d tokens after cancel, want 1", n)
	}
}
