#!/usr/bin/env bash
# Profile of the L2 hit (bench/README.md, the l2 row of -cpu): a writer
# replica and a reader replica, both L1 off, on one Redis, as bench's
# l2-reader configuration; the writer stores /clients/1..1000, and after
# coherence.max_lag the reader (one core, admin.pprof on) serves them from
# L2: 20 s of GET /clients/{id} at 3,000 req/s (vegeta), a 15 s CPU profile
# from the reader's admin listener, then /proc CPU per request of the
# reader and of Redis, and the profile's top entries.
#
# READER_L1=1 turns the reader's L1 on (cache.l1.max_bytes 256MiB): the
# same run then measures an L1 hit of the same route, configuration and
# sizes, the L2 hit's baseline (Redis's CPU falls to 0). With PERF_RECORD=1
# (as root; build the binary with `go build -o /tmp/sidecache
# ./cmd/sidecache`, bin/ builds have no symbols) it also samples the reader
# with `perf record -e cpu-clock -g` for 6 s at 2 kHz (reader.data: 18,000
# requests, the kernel's part included, which pprof leaves out; read it
# with perf script) and counts its system calls per request over the
# profile's 15 s (perf stat).
#
# BARE=redis measures, in the same way, the floor in place of the reader:
# bench's bare Go server at GOMAXPROCS=1 (-serve-bare, the -cpu l2 row's
# *bare Go GOMAXPROCS=1 (one Redis GET per request)*) reading each body
# from the same Redis with one GET; BARE=memory the same server from
# memory (its L1 hit's counterpart). No writer, no pprof: the same load,
# /proc CPU, perf stat and PERF_RECORD's samples, so a sidecache run and a
# bare run read side by side (flat profiles: `perf script -i reader.data`).
# The binary argument is still given, and unused.
#
#   make build bin/bench && bench/profile-l2-hit.sh bin/sidecache [out-dir]
#   BARE=redis PERF_RECORD=1 bench/profile-l2-hit.sh bin/sidecache [out-dir]
set -euo pipefail
bin=$(realpath "$1")
. "$(dirname "$0")/ports.sh"
bench_out "${2:-}"
read -r wport wadmin rport radmin demo_port redis_port < <(free_ports 6)
conf() { # listen admin-listen pprof
  bin/bench -print-config l2-reader |
    sed -e "s#^listen: .*#listen: $1#" \
        -e "s#^  listen: .*#  listen: $2\n  pprof: $3#" \
        -e "s#^  url: .*#  url: http://127.0.0.1:$demo_port#" \
        -e "s#addrs: \[.*\]#addrs: [127.0.0.1:$redis_port]#"
}
conf 127.0.0.1:$wport 127.0.0.1:$wadmin false >"$out/writer.yaml"
conf 127.0.0.1:$rport 127.0.0.1:$radmin true |
  sed -e "${READER_L1:+s/^    max_bytes: 0\$/    max_bytes: 256MiB/}" >"$out/reader.yaml"
seq 1 1000 | sed "s#^#GET http://127.0.0.1:$rport/clients/#" >"$out/targets.txt"
redis-server --port $redis_port --save '' --appendonly no >"$out/redis.log" 2>&1 &
rd=$!
bin/demo-upstream -listen 127.0.0.1:$demo_port -clients 10000 >/dev/null 2>&1 &
demo=$!
if [ -n "${BARE:-}" ]; then
  case $BARE in
  redis) bare=(-redis 127.0.0.1:$redis_port) ;;
  memory) bare=() ;;
  *) echo "BARE is redis or memory, not $BARE" >&2; exit 2 ;;
  esac
  for _ in $(seq 50); do redis-cli -p $redis_port ping >/dev/null 2>&1 && break; sleep 0.1; done
  GOMAXPROCS=1 bin/bench -serve-bare 127.0.0.1:$rport "${bare[@]}" >"$out/reader.log" 2>&1 &
  sc=$!
  trap 'kill $sc $demo $rd 2>/dev/null; wait 2>/dev/null' EXIT
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$rport/clients/1" >/dev/null && break; sleep 0.1; done
  running $sc $demo $rd
else
  GOMAXPROCS=1 "$bin" -config "$out/writer.yaml" -log-level warn >"$out/writer.log" 2>&1 &
  wr=$!
  GOMAXPROCS=1 "$bin" -config "$out/reader.yaml" -log-level warn >"$out/reader.log" 2>&1 &
  sc=$!
  trap 'kill $sc $wr $demo $rd 2>/dev/null; wait 2>/dev/null' EXIT
  for p in $wadmin $radmin; do
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$p/readyz" >/dev/null && break; sleep 0.1; done
  done
  running $sc $wr $demo $rd
  # The reader serves an entry younger than coherence.max_lag (1 s) whatever
  # its proof, and an older one while its invalidation channel is proven
  # (its own heartbeats come back) and the entry was stored after its floor
  # (cache.Tiered.coherent). The sleeps let the reader be proven and the
  # entries age past max_lag, so the run measures the steady state's path.
  sleep 3
  seq 1 1000 | sed "s#^#http://127.0.0.1:$wport/clients/#" | xargs -P 16 -I{} curl -sf -o /dev/null -H "Host: 127.0.0.1:$rport" {}
  sleep 2
fi
"$out/vegeta" attack -targets "$out/targets.txt" -rate 3000 -duration 2s >/dev/null # warm
t0=$(ticks $sc); r0=$(ticks $rd)
"$out/vegeta" attack -targets "$out/targets.txt" -rate 3000 -duration 20s -workers 64 -max-workers 512 >"$out/attack.bin" &
vg=$!
sleep 3
if [ -n "${PERF_RECORD:-}" ]; then
  (sleep 4; perf record -q -F 2000 -e cpu-clock -g -p $sc -o "$out/reader.data" -- sleep 6 >/dev/null 2>&1) &
  perf stat -x, -e task-clock,context-switches,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_epoll_pwait \
    -p $sc -o "$out/reader.perf" -- sleep 15 >/dev/null 2>&1 &
fi
if [ -n "${BARE:-}" ]; then
  sleep 15
else
  curl -sf -H 'Authorization: Bearer bench' -o "$out/cpu.pprof" "http://127.0.0.1:$radmin/debug/pprof/profile?seconds=15"
fi
wait $vg
t1=$(ticks $sc); r1=$(ticks $rd)
n=$(requests "$out/attack.bin")
hz=$(getconf CLK_TCK)
echo "requests $n, reader CPU $(( (t1 - t0) * 1000000 / hz / n )) µs per request, redis $(( (r1 - r0) * 1000000 / hz / n )) µs per request"
if [ -n "${PERF_RECORD:-}" ]; then
  awk -F, '$3 == "task-clock" {printf "  task-clock %.1f µs", $1 * 1000 / 45000}
    $3 ~ /^(context|syscalls)/ {sub("syscalls:sys_enter_", "", $3); printf ", %s %.2f", $3, $1 / 45000}
    END {print " per request over 15 s"}' "$out/reader.perf"
  echo "  µs per request by leaf frame (leaf_split in ports.sh): $(leaf_split "$out/reader.data")"
fi
[ -n "${BARE:-}" ] && exit 0
curl -sf http://127.0.0.1:$radmin/metrics | grep -E '^sidecache_requests_total\{result="(hit|miss|collapsed)",route="client"' || true
go tool pprof -top -nodecount=30 "$bin" "$out/cpu.pprof" 2>/dev/null | head -38
echo "profile: $out/cpu.pprof"
