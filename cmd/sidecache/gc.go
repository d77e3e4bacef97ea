package main

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/sidecache/sidecache/internal/tracing"
)

// runtimeSettings are the Go runtime's settings for a sidecar.
type runtimeSettings struct {
	percent  int   // 0: leave GOGC as it is
	memLimit int64 // 0: leave GOMEMLIMIT as it is
	procs    int   // 0: leave GOMAXPROCS as it is
}

// sidecarGCPercent is GOGC when a memory limit bounds the heap. A sidecar
// with an empty or small cache has a live heap of a few MiB, so at Go's
// default (100) every few MiB allocated start a collection: several per
// second under load, a few per cent of the CPU of every request. A memory
// limit keeps the larger heap goal from growing past what the pod may use;
// near it the runtime collects as often as it must (the soft limit of
// runtime/debug.SetMemoryLimit).
const sidecarGCPercent = 400

// sidecarProcs is GOMAXPROCS unless the operator sets it. A sidecar serves
// one pod's traffic, which one core carries many times over (make bench:
// 24,421 hits/s on one core of the 2-core bench machine, the load generator
// on the other), and what it costs is CPU per request. With a
// second P, every request that parks on the network (the upstream's answer,
// the client's next request) wakes an idle thread that finds nothing to do
// and sleeps again: a futex pair per hand-off. Measured at 3,000 req/s
// (bench/README.md, "CPU per request", two runs): a hit 59–73 → 49–58 µs,
// a pass-through 131–137 → 98–112 µs. Linkerd's proxy makes the same
// choice (one worker unless configured). An operator who runs sidecache as
// a shared proxy, or whose pod needs more than one core of caching, sets
// GOMAXPROCS.
const sidecarProcs = 1

// runtimeDefaults picks the settings from the environment and the cgroup's
// memory limit (v2 memory.max, else v1 memory.limit_in_bytes, as read from
// files by readFile): GOMEMLIMIT set by the operator wins; unset, it is
// 90 % of the cgroup's limit (the rest for the runtime's own memory and
// in-flight buffers). GOGC set by the operator wins; unset, it is
// sidecarGCPercent only when a memory limit is in force, since without one
// a larger heap goal could take the node's memory. GOMAXPROCS set by the
// operator wins (any value, so GOMAXPROCS=0 keeps Go's own default: the
// CPUs the container may use); unset, it is sidecarProcs.
func runtimeDefaults(getenv func(string) string, readFile func(string) ([]byte, error)) runtimeSettings {
	var s runtimeSettings
	limited := getenv("GOMEMLIMIT") != "" && getenv("GOMEMLIMIT") != "off"
	if getenv("GOMEMLIMIT") == "" {
		if n := cgroupMemoryLimit(readFile); n > 0 {
			s.memLimit = n / 10 * 9
			limited = true
		}
	}
	if getenv("GOGC") == "" && limited {
		s.percent = sidecarGCPercent
	}
	if getenv("GOMAXPROCS") == "" {
		s.procs = sidecarProcs
	}
	return s
}

// cgroupMemoryLimit is the container's memory limit in bytes, 0 when there
// is none (unlimited, not in a cgroup, or unreadable).
func cgroupMemoryLimit(readFile func(string) ([]byte, error)) int64 {
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := readFile(p)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		n, err := strconv.ParseInt(v, 10, 64)
		// "max" (v2) or a page-rounded MaxInt64 (v1) both mean no limit.
		if err != nil || n <= 0 || n >= 1<<60 {
			return 0
		}
		return n
	}
	return 0
}

// applyRuntimeDefaults sets what runtimeDefaults picked, once at start.
func applyRuntimeDefaults() {
	s := runtimeDefaults(os.Getenv, os.ReadFile)
	if s.memLimit > 0 {
		debug.SetMemoryLimit(s.memLimit)
	}
	if s.percent > 0 {
		debug.SetGCPercent(s.percent)
	}
	if s.procs > 0 {
		runtime.GOMAXPROCS(s.procs)
	}
}

// runtimeAttrs are the start-up line's fields: GOMAXPROCS, the soft memory
// limit ("none" rather than math.MaxInt64 when there is none), and whether
// tracing is on and where its spans go.
func runtimeAttrs(procs int, memLimit int64, getenv func(string) string) []any {
	limit := any("none")
	if memLimit != math.MaxInt64 {
		limit = memLimit
	}
	trace := "off"
	if on, err := tracing.Enabled(getenv); err == nil && on {
		trace = "otlp " + tracing.Endpoint(getenv)
	}
	return []any{"gomaxprocs", procs, "memory_limit", limit, "tracing", trace}
}
