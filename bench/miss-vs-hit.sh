#!/usr/bin/env bash
# The batched miss against the L1 hit on one binary, in one run (issue 23:
# a batched miss's CPU per request over a hit's): the cache+batch
# configuration on one core, L1 only, as bench/profile-batched-miss.sh;
# 20 s of GET /users/{id} at 3,000 req/s on 60,000 ids never asked before
# (each a batched miss), then 20 s on the same ids (each an L1 hit). For
# each phase: /proc CPU per request (and its user part), and, when perf
# runs (as root), task-clock, context switches and syscalls per request
# over 15 s of it. With PERF_RECORD=1 it also samples each phase with
# `perf record -e cpu-clock -g` for 6 s and prints the µs per request
# spent under a few frames (the kernel's part of them included, which
# pprof leaves out), from the same samples in both phases, and the same
# samples by where their leaf frame is (ports.sh's leaf_split).
#
#   make build bin/bench && bench/miss-vs-hit.sh /tmp/sidecache [out-dir]
#
# Build the binary with `go build -o /tmp/sidecache ./cmd/sidecache` for
# PERF_RECORD (bin/ builds have no symbols). Read the ratio within a run:
# on a shared machine the absolute figures move by 10–20 % between runs,
# with the bulk call's size (the upstream is slower when the machine is
# busy, so more ids share a call).
#
# L1_MAX_BYTES (e.g. 16MiB; default: the config's 256MiB) sets
# cache.l1.max_bytes and takes the profile at the bound: a warm phase first
# sends never-asked ids at the same rate, 10 s at a time, until the L1 is
# full and evicting (sidecache_l1_items grew by under 5 % of the ids sent
# in the last 10 s), so the miss phase's misses store into a full L1, as a
# sidecar's do after its first minutes; without it the L1 fills all through
# the miss phase (every miss a first touch of new heap). The hit phase then
# asks HIT_IDS ids (default 1000, the bench -cpu hit row's key count) of
# users 1.., each requested twice before it, since the miss phase's 60,000
# no longer fit (a smaller working set: its hit is cheaper than the default
# run's, so read its ratio apart from theirs). Each phase prints its L1 hit share.
set -euo pipefail
bin=$(realpath "$1")
. "$(dirname "$0")/ports.sh"
bench_out "${2:-}"
read -r port demo_port admin_port < <(free_ports 3)
l1_batch_config $port $demo_port $admin_port |
  sed -e "${L1_MAX_BYTES:+s#^    max_bytes: .*#    max_bytes: $L1_MAX_BYTES#}" >"$out/sidecache.yaml"
grep -q "^    max_bytes: ${L1_MAX_BYTES:-256MiB}\$" "$out/sidecache.yaml" || { echo "l1 max_bytes not set in $out/sidecache.yaml" >&2; exit 1; }
seq 100001 160000 | sed "s#^#GET http://127.0.0.1:$port/users/#" >"$out/targets.txt"
bin/demo-upstream -listen 127.0.0.1:$demo_port -slots 10 -query-time 5ms -per-row-time 50us -clients 10000 -users 10000000 >"$out/demo.log" 2>&1 &
demo=$!
GOMAXPROCS=1 "$bin" -config "$out/sidecache.yaml" -log-level warn >"$out/sidecache.log" 2>&1 &
sc=$!
trap 'kill $sc $demo 2>/dev/null; wait 2>/dev/null' EXIT
for _ in $(seq 100); do curl -sf http://127.0.0.1:$admin_port/readyz >/dev/null && break; sleep 0.1; done
running $sc $demo
hz=$(getconf CLK_TCK)
perf=$(command -v perf && perf stat -e task-clock -- true >/dev/null 2>&1 && echo yes || true)
# Frames whose µs per request PERF_RECORD prints ("batch.Loader.run" is
# the batch's goroutine, whose frame name carries its type parameters;
# run may be inlined into the goroutine's wrapper, runOne is not).
frames='net/http.(*conn).serve|net/http.(*response).finishRequest|net/http.(*connReader).backgroundRead|proxy.(*exchange).join|batch.Loader.run|proxy.(*exchange).fetchBulk|proxy.(*exchange).keepElement|l1.(*Store).Set|bulk.SplitFor|runtime.gcBgMarkWorker|runtime.mallocgc|runtime.sysmon'

l1hits() { echo "$(metric sidecache_cache_lookups_total 'tier="l1"' 'result="hit"') $(metric sidecache_cache_lookups_total 'tier="l1"' 'result="miss"')"; }

phase() {
  local name=$1 targets=${2:-$out/targets.txt} t0 u0 t1 u1 n h0 m0 h1 m1
  read -r h0 m0 < <(l1hits)
  t0=$(ticks $sc) u0=$(ticks $sc user)
  "$out/vegeta" attack -targets "$targets" -rate 3000 -duration 20s -workers 128 -max-workers 512 >"$out/$name.bin" &
  local vg=$!
  sleep 3
  if [ -n "$perf" ]; then
    if [ -n "${PERF_RECORD:-}" ]; then
      (sleep 4; perf record -q -F 2000 -e cpu-clock -g -p $sc -o "$out/$name.data" -- sleep 6 >/dev/null 2>&1) &
    fi
    perf stat -x, -e task-clock,context-switches,raw_syscalls:sys_enter -p $sc -o "$out/$name.perf" -- sleep 15
  fi
  wait $vg
  t1=$(ticks $sc) u1=$(ticks $sc user)
  n=$(requests "$out/$name.bin")
  read -r h1 m1 < <(l1hits)
  echo "$name: $n requests, $(( (t1 - t0) * 1000000 / hz / n )) µs CPU per request ($(( (u1 - u0) * 1000000 / hz / n )) user)," \
    "$("$out/vegeta" report -type=json <"$out/$name.bin" | grep -o '"status_codes":{[^}]*}'), L1 hits $(( 100 * (h1 - h0) / (h1 - h0 + m1 - m0 + 1) )) %"
  if [ -n "$perf" ]; then
    awk -F, '/task-clock/{tc=$1} /context-switches/{cs=$1} /sys_enter/{sy=$1}
      END {printf "  15 s at 3,000 req/s: task-clock %.1f µs, %.2f context switches, %.2f syscalls per request\n", tc*1000/45000, cs/45000, sy/45000}' "$out/$name.perf"
  fi
}

l1state() { echo "sidecache_l1_bytes $(( $(metric sidecache_l1_bytes) >> 20 )) MiB, sidecache_l1_items $(metric sidecache_l1_items)"; }
if [ -n "${L1_MAX_BYTES:-}" ]; then
  # Warm: 10 s of never-asked ids (users 1,000,001 on) at a time until the
  # items held stop growing while ids keep being stored.
  first=1000001 sent=0
  for round in $(seq 30); do
    items0=$(metric sidecache_l1_items) fetched0=$(metric sidecache_batch_size_sum)
    seq $first $((first + 29999)) | sed "s#^#GET http://127.0.0.1:$port/users/#" >"$out/warm.txt"
    first=$((first + 30000))
    "$out/vegeta" attack -targets "$out/warm.txt" -rate 3000 -duration 10s -workers 128 -max-workers 512 >/dev/null
    items1=$(metric sidecache_l1_items) fetched1=$(metric sidecache_batch_size_sum)
    sent=$((sent + 30000))
    grown=$((items1 - items0)) fetched=$((fetched1 - fetched0))
    if [ "$fetched" -gt 0 ] && [ $((grown * 20)) -lt "$fetched" ]; then
      echo "warm: $sent never-asked ids; $(l1state); the last 10 s fetched $fetched ids, items held $grown: L1 at its bound ($L1_MAX_BYTES), evicting"
      break
    fi
    [ "$round" -lt 30 ] || { echo "warm: the L1 never stopped growing ($(l1state)) after $sent ids" >&2; exit 1; }
  done
fi
phase miss
curl -sf http://127.0.0.1:$admin_port/metrics | awk '/^sidecache_batch_size_sum/{s=$2} /^sidecache_batch_size_count/{c=$2}
  END {if (c) printf "  %d bulk calls, %.1f ids per call\n", c, s/c}'
if [ -n "${L1_MAX_BYTES:-}" ]; then
  echo "  after the miss phase: $(l1state)"
  seq 1 "${HIT_IDS:-1000}" | sed "s#^#GET http://127.0.0.1:$port/users/#" >"$out/hits.txt"
  # Twice: a full L1 may refuse a new key once (ristretto's admission
  # weighs its frequency against the evicted ones'); asked again, it is in.
  for _ in 1 2; do sed 's#^GET ##' "$out/hits.txt" | xargs -P 8 -n 50 curl -sf >/dev/null; done
  phase hit "$out/hits.txt"
else
  phase hit
fi
if [ -n "${PERF_RECORD:-}" ] && [ -n "$perf" ]; then
  echo "µs per request by leaf frame (leaf_split in ports.sh):"
  for name in miss hit; do echo "  $name: $(leaf_split "$out/$name.data")"; done
  echo "µs per request under each frame (6 s of samples at 2 kHz, 18,000 requests):"
  for name in miss hit; do
    perf script -i "$out/$name.data" 2>/dev/null | awk -v re="$frames" -v name="$name" '
      BEGIN {n = split(re, fr, "|")}
      function is(f, p) {
        if (p == "batch.Loader.run") return index(f, "internal/batch.(*Loader[") && f ~ /\)\.run(One)?$/
        return index(f, p) > 0 }
      function flush(   i, j) {
        if (!k) return
        total++
        for (i = 1; i <= n; i++) for (j = 1; j <= k; j++) if (is(st[j], fr[i])) {under[i]++; break}
        k = 0 }
      /^$/ {flush(); next}
      /^[ \t]/ {split($2, f, "+"); st[++k] = f[1]; next}
      END {flush(); printf "  %s: %.1f µs per request in all\n", name, total*500/18000
        for (i = 1; i <= n; i++) printf "    %6.2f  %s\n", under[i]*500/18000, fr[i]}'
  done
fi
