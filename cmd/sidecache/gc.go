package main

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// gcSettings are the garbage collector's settings for a sidecar.
type gcSettings struct {
	percent  int   // 0: leave GOGC as it is
	memLimit int64 // 0: leave GOMEMLIMIT as it is
}

// sidecarGCPercent is GOGC when a memory limit bounds the heap. A sidecar
// with an empty or small cache has a live heap of a few MiB, so at Go's
// default (100) every few MiB allocated start a collection: several per
// second under load, a few per cent of the CPU of every request. A memory
// limit keeps the larger heap goal from growing past what the pod may use;
// near it the runtime collects as often as it must (the soft limit of
// runtime/debug.SetMemoryLimit).
const sidecarGCPercent = 400

// gcDefaults picks the settings from the environment and the cgroup's
// memory limit (v2 memory.max, else v1 memory.limit_in_bytes, as read from
// files by readFile): GOMEMLIMIT set by the operator wins; unset, it is 90 %
// of the cgroup's limit (the rest for the runtime's own memory and
// in-flight buffers). GOGC set by the operator wins; unset, it is
// sidecarGCPercent only when a memory limit is in force, since without one
// a larger heap goal could take the node's memory.
func gcDefaults(getenv func(string) string, readFile func(string) ([]byte, error)) gcSettings {
	var s gcSettings
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

// applyGCDefaults sets what gcDefaults picked, once at start.
func applyGCDefaults() {
	s := gcDefaults(os.Getenv, os.ReadFile)
	if s.memLimit > 0 {
		debug.SetMemoryLimit(s.memLimit)
	}
	if s.percent > 0 {
		debug.SetGCPercent(s.percent)
	}
}
