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

# metric NAME [PATTERN [PATTERN]] prints the sum of the series of NAME
# that the sidecar's admin listener on $admin_port exposes, of those whose
# line holds every PATTERN given.
metric() {
  curl -sf http://127.0.0.1:$admin_port/metrics | awk -v m="$1" -v a="${2:-}" -v b="${3:-}" '
    $1 == m || index($1, m "{") == 1 { if ((a == "" || index($0, a)) && (b == "" || index($0, b))) s += $NF } END {printf "%.0f\n", s}'
}

# ticks PID [user] prints the CPU clock ticks (CLK_TCK a second) process
# PID has spent, user and system (only user with "user"), from
# /proc/PID/stat.
ticks() { awk -v f="${2:-all}" '{print f == "user" ? $14 : $14 + $15}' "/proc/$1/stat"; }

# requests FILE prints how many requests the vegeta attack saved in FILE
# sent.
requests() { "$out/vegeta" report -type=json <"$1" | sed -n 's/.*"requests":\([0-9]*\).*/\1/p'; }

# leaf_split DATA prints the µs per request of `perf record` samples in
# DATA (6 s at 2 kHz over 18,000 requests) by where each sample's leaf
# frame is: the kernel (system calls, the loopback's TCP, switches; its
# .isra/.part/.constprop/.cold clones included), Go's runtime (scheduler,
# poller, memory, maps), net/http, sidecache's own packages, ristretto,
# BLAKE2b (the element tags), and the rest (other Go packages, frames
# perf could not name).
leaf_split() {
  perf script -i "$1" -F ip,sym 2>/dev/null | awk '
    /^$/ {top = 0; next}
    top {next}
    {top = 1; total++; f = $2
     if (f ~ /sidecache\/internal\//) c["sidecache"]++
     else if (f ~ /^net\/http\./) c["net/http"]++
     else if (f ~ /^(runtime\.|internal\/runtime\/)/) c["Go runtime"]++
     else if (f ~ /ristretto/) c["ristretto"]++
     else if (f ~ /blake2b/) c["BLAKE2b"]++
     else if (f ~ /^[A-Za-z0-9_]+(\.(isra|part|constprop|cold|llvm)(\.[0-9]+)?)*$/) c["kernel"]++
     else c["rest"]++}
    END {printf "%.1f in all", total * 500 / 18000
      n = split("kernel,Go runtime,net/http,sidecache,ristretto,BLAKE2b,rest", k, ",")
      for (i = 1; i <= n; i++) printf ", %s %.1f", k[i], c[k[i]] * 500 / 18000
      print ""}'
}
