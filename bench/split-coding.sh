#!/usr/bin/env bash
# What gzip-coding a split list costs (README, "What the tables show"):
# the cache+batch configuration on one core, L1 only, users 1..1000
# cached first; then GET /users?ids=… of 20 distinct random ids (every
# element from L1: the list is only reassembled) at 500 req/s for 10 s,
# alternately with `Accept-Encoding: gzip` (the list is gzip-coded, as
# Express's compression() would code the app's own list) and with
# `Accept-Encoding: identity`, twice each: /proc CPU per list, and the
# size of one list both ways.
#
#   make build bin/bench && bench/split-coding.sh [out-dir]
set -euo pipefail
. "$(dirname "$0")/ports.sh"
bench_out "${1:-}"
read -r port demo_port admin_port < <(free_ports 3)
l1_batch_config $port $demo_port $admin_port >"$out/sidecache.yaml"
bin/demo-upstream -listen 127.0.0.1:$demo_port >"$out/demo.log" 2>&1 &
demo=$!
GOMAXPROCS=1 bin/sidecache -config "$out/sidecache.yaml" -log-level warn >"$out/sidecache.log" 2>&1 &
sc=$!
trap 'kill $sc $demo 2>/dev/null; wait 2>/dev/null' EXIT
for _ in $(seq 100); do curl -sf http://127.0.0.1:$admin_port/readyz >/dev/null && break; sleep 0.1; done
running $sc $demo
for id in $(seq 1000); do echo "url = \"http://127.0.0.1:$port/users/$id\""; echo "output = /dev/null"; done >"$out/prefill.curl"
curl -sf --no-progress-meter --parallel --parallel-max 8 -K "$out/prefill.curl"
for enc in gzip identity; do
  awk -v port="$port" -v enc="$enc" 'BEGIN {
    srand(1)
    for (r = 0; r < 5000; r++) {
      delete seen; ids = ""
      for (n = 0; n < 20;) { id = 1 + int(rand() * 1000); if (!(id in seen)) { seen[id]; ids = ids (n++ ? "," : "") id } }
      printf "GET http://127.0.0.1:%s/users?ids=%s\nAccept-Encoding: %s\n\n", port, ids, enc
    }}' >"$out/targets-$enc.txt"
done
for enc in gzip identity gzip identity; do
  b0=$(metric sidecache_batch_size_count) t0=$(ticks $sc)
  "$out/vegeta" attack -targets "$out/targets-$enc.txt" -rate 500 -duration 10s -workers 32 >"$out/$enc.bin"
  t1=$(ticks $sc) b1=$(metric sidecache_batch_size_count)
  report=$("$out/vegeta" report -type=json <"$out/$enc.bin")
  n=$(sed -n 's/.*"requests":\([0-9]*\).*/\1/p' <<<"$report")
  echo "Accept-Encoding: $enc: $n lists, $(( (t1 - t0) * 1000000 / $(getconf CLK_TCK) / n )) µs CPU per list," \
    "$(grep -o '"status_codes":{[^}]*}' <<<"$report"), $((b1 - b0)) bulk calls (0: every element from L1)"
done
list="http://127.0.0.1:$port/users?ids=$(seq -s, 1 20)"
echo "one list of 20: $(curl -sf -H 'Accept-Encoding: gzip' -o /dev/null -w '%{size_download}' "$list") B gzip-coded," \
  "$(curl -sf -o /dev/null -w '%{size_download}' "$list") B not"
