#!/usr/bin/env bash
# `make run`: the bundled demo upstream on 127.0.0.1:3000 and the sidecar
# (L1-only, config/sidecache.yaml) on 127.0.0.1:8080 in front of it.
# Ctrl-C stops both.
set -euo pipefail
bin=${1:-bin}
"$bin/demo-upstream" -listen 127.0.0.1:3000 &
demo=$!
trap 'kill $demo 2>/dev/null; wait $demo 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  (exec 3<>/dev/tcp/127.0.0.1/3000) 2>/dev/null && break
  sleep 0.1
done
cat <<MSG

  sidecache is starting in front of the demo upstream. Try:

    curl -i http://127.0.0.1:8080/clients/42      # twice: the second is a hit
    curl -i 'http://127.0.0.1:8080/users?ids=3,1,2'
    curl -s http://127.0.0.1:9090/metrics | grep ^sidecache_

MSG
"$bin/sidecache" -config config/sidecache.yaml
