# Sourced by bench's profiling scripts (miss-vs-hit.sh, split-coding.sh,
# profile-batched-miss.sh, profile-l2-hit.sh).
#
# bench_out DIR sets out to DIR (made; a new temporary directory when DIR
# is empty), makes the repository's top the working directory, and builds
# vegeta into $out: every script's start, after it has resolved its own
# path arguments (relative to where it was called).
bench_out() {
  out=$(realpath -m "${1:-$(mktemp -d)}")
  mkdir -p "$out"
  cd "$(dirname "${BASH_SOURCE[0]}")/.."
  (cd bench && go build -o "$out/vegeta" github.com/tsenart/vegeta/v12)
}

# free_ports N prints N ports free now, picked at random: two runs at once
# on one machine (several people measuring) must not bind each other's
# ports. With fixed ports the second run's demo failed to bind, silently,
# and its sidecar fetched from the first run's demo. They are taken below
# the kernel's ephemeral range, where no outgoing connection's local port
# (vegeta's, a TIME_WAIT left by the previous run) can hold them: a port
# picked inside it was once taken by the time the demo bound it.
free_ports() {
  local low used
  low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range)
  used=$(ss -Htan | awk '{n = split($4, a, ":"); print a[n]}' | sort -u)
  for p in $(shuf -i 10000-$((low - 1)) -n $(($1 * 20))); do
    grep -qx "$p" <<<"$used" || echo "$p"
  done | head -"$1" | xargs
}

# running PID... exits the script, loudly, when a process it started has
# exited (a port taken meanwhile, a bad config): see the logs under $out.
# A child that exited and was not yet waited for is a zombie, which kill -0
# still finds; its state in /proc tells.
running() {
  local pid state
  for pid in "$@"; do
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)
    if [ -z "$state" ] || [ "$state" = Z ]; then
      echo "process $pid this script started has exited; see the logs in $out" >&2
      exit 1
    fi
  done
}

# l1_batch_config PORT DEMO_PORT ADMIN_PORT prints bench's cache+batch
# configuration with its l2 block dropped (L1 only, as the batch row of
# `make bench-cpu`: a Redis left on 6379 would otherwise put an L2 lookup
# and write in every miss), listening on PORT, its admin on ADMIN_PORT, in
# front of the demo upstream on DEMO_PORT. Run from the repository's top.
l1_batch_config() {
  bin/bench -print-config cache+batch |
    sed -e '/^  l2:/,/^[a-z]/{/^[a-z]/!d;}' \
        -e "s#^listen: .*#listen: 127.0.0.1:$1#" \
        -e "s#^  listen: .*#  listen: 127.0.0.1:$3#" \
        -e "s#^  url: .*#  url: http://127.0.0.1:$2#"
}
