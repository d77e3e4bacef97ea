#!/usr/bin/env bash
# `make run`: the bundled demo upstream and the sidecar (L1-only,
# config/sidecache.yaml) in front of it, on 127.0.0.1. Ctrl-C stops both.
#
#   PORT=8080 UPSTREAM_PORT=3000 ADMIN_PORT=9090 scripts/run-demo.sh [bindir]
#
# Each process must report that it listens before the next starts: if the
# demo upstream cannot bind (something else holds its port), the sidecar
# would otherwise proxy, and cache, whatever service answers there.
set -euo pipefail
bin=${1:-bin}
port=${PORT:-8080}
upstream_port=${UPSTREAM_PORT:-3000}
admin_port=${ADMIN_PORT:-9090}
cd "$(dirname "$0")/.."

logs=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$logs"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start NAME LOG_LINE CMD...: runs CMD with its stderr shown and kept in a
# log, and returns once LOG_LINE appears (it listens), or fails with the
# log if CMD exits first.
start() {
  local name=$1 ready=$2 log=$logs/$1.log
  shift 2
  "$@" 2> >(tee "$log" >&2) &
  pids+=($!)
  local pid=$!
  for _ in $(seq 300); do
    grep -q "$ready" "$log" 2>/dev/null && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null || true
      sleep 0.1 # let tee finish the log
      echo >&2
      echo "run-demo: $name did not start (see its error above); nothing is left running." >&2
      return 1
    fi
    sleep 0.1
  done
  echo "run-demo: $name did not report listening within 30s" >&2
  return 1
}

if ! start "the demo upstream on 127.0.0.1:$upstream_port" "listening on" \
  "$bin/demo-upstream" -listen "127.0.0.1:$upstream_port"; then
  echo "run-demo: is port $upstream_port taken? Choose another: make run UPSTREAM_PORT=3001" >&2
  exit 1
fi

export SIDECACHE_LISTEN=127.0.0.1:$port
export SIDECACHE_ADMIN_LISTEN=127.0.0.1:$admin_port
export UPSTREAM_URL=http://127.0.0.1:$upstream_port
if ! start "sidecache on 127.0.0.1:$port (admin 127.0.0.1:$admin_port)" "sidecache listening" \
  "$bin/sidecache" -config config/sidecache.yaml; then
  echo "run-demo: is port $port or $admin_port taken? Choose others: make run PORT=8081 ADMIN_PORT=9091" >&2
  exit 1
fi

cat <<MSG

  sidecache (127.0.0.1:$port) is up in front of the demo upstream (127.0.0.1:$upstream_port). Try:

    curl -i http://127.0.0.1:$port/clients/42      # twice: the second is a hit
    curl -i 'http://127.0.0.1:$port/users?ids=3,1,2'
    curl -s http://127.0.0.1:$admin_port/metrics | grep ^sidecache_

  Ctrl-C stops both.

MSG
# Either process ending ends the demo (the trap stops the other).
wait -n "${pids[@]}"
