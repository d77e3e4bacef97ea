package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sidecache/sidecache/bench/internal/resp"
)

// redisDo sends one command and returns the reply as text, an array's
// elements joined by spaces: enough for PING, INFO, PUBLISH and PUBSUB
// NUMSUB.
func redisDo(ctx context.Context, addr string, args ...string) (string, error) {
	v, err := resp.Do(ctx, addr, args...)
	if err != nil {
		return "", err
	}
	return text(v), nil
}

func text(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = text(e)
		}
		return strings.Join(parts, " ")
	}
	return ""
}

// info returns the numeric fields of INFO section.
func info(ctx context.Context, addr, section string) (map[string]float64, error) {
	s, err := redisDo(ctx, addr, "INFO", section)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(s, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			out[k] = f
		}
	}
	return out, nil
}

// procCPU is the CPU time of every thread of pid, from the scheduler's
// nanosecond counters (/proc/<pid>/task/*/schedstat), which resolve the
// few milliseconds an idle replica spends where clock ticks would not.
func procCPU(pid int) time.Duration {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			sum += time.Duration(n)
		}
	}
	return sum
}

// selfCPU is the bench's own CPU time (the emulated peers and the writer).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machine is /proc/stat's all-CPU line: busy and total jiffies.
func machine() (busy, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, s := range f[1:] {
		v, _ := strconv.ParseFloat(s, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
