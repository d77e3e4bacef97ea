#!/usr/bin/env bash
# Profile of the batched miss (bench/README.md, "Second pass"): the
# cache+batch configuration on one core with admin.pprof on, 20 s of
# GET /users/{id} on ids never asked before at 3,000 req/s (vegeta), a 15 s
# CPU profile from the admin listener, then /proc CPU per request, the
# requests per bulk call and the profile's top entries. L1 only, as the
# batch row of `make bench-cpu` (no l2 block: a Redis left on 6379 would
# otherwise put the L2 lookup and write of every miss in the profile).
#
#   make build bin/bench && bench/profile-batched-miss.sh bin/sidecache [out-dir]
set -euo pipefail
bin=$(realpath "$1")
. "$(dirname "$0")/ports.sh"
bench_out "${2:-}"
read -r port demo_port admin_port < <(free_ports 3)
l1_batch_config $port $demo_port $admin_port | sed "s#^\(  listen: .*\)#\1\n  pprof: true#" >"$out/sidecache.yaml"
seq 100001 180000 | sed "s#^#GET http://127.0.0.1:$port/users/#" >"$out/targets.txt"
bin/demo-upstream -listen 127.0.0.1:$demo_port -slots 10 -query-time 5ms -per-row-time 50us -clients 10000 -users 10000000 >/dev/null 2>&1 &
demo=$!
GOMAXPROCS=1 "$bin" -config "$out/sidecache.yaml" -log-level warn >"$out/sidecache.log" 2>&1 &
sc=$!
trap 'kill $sc $demo 2>/dev/null; wait 2>/dev/null' EXIT
for _ in $(seq 100); do curl -sf http://127.0.0.1:$admin_port/readyz >/dev/null && break; sleep 0.1; done
running $sc $demo
t0=$(ticks $sc)
"$out/vegeta" attack -targets "$out/targets.txt" -rate 3000 -duration 20s -workers 128 -max-workers 512 >"$out/attack.bin" &
vg=$!
sleep 3
curl -sf -H 'Authorization: Bearer bench' -o "$out/cpu.pprof" "http://127.0.0.1:$admin_port/debug/pprof/profile?seconds=15"
wait $vg
t1=$(ticks $sc)
n=$(requests "$out/attack.bin")
hz=$(getconf CLK_TCK)
echo "requests $n, sidecar CPU $(( (t1 - t0) * 1000000 / hz / n )) µs per request"
curl -sf http://127.0.0.1:$admin_port/metrics | grep -E '^sidecache_batch_size_(sum|count)'
go tool pprof -top -cum -nodecount=30 "$bin" "$out/cpu.pprof" 2>/dev/null | head -40
echo "profile: $out/cpu.pprof"
