#!/usr/bin/env bash
# A compressed soak of `kdiag watch`: SCANS scans of the whole machine at
# an INTERVAL of seconds (default 17,280 at 1 s: the scans of a day at the
# default 5 s interval, in 4.8 hours), grouped by name with the textfile
# exporter, while a churn of short-lived processes (batches of 10 twice a
# second, 17 a second on 2 shared cores; each a shell that names itself and
# execs sleep, which renames it: new pids every scan, few new groups)
# comes and goes. Every minute: watch's RSS, open
# descriptors and CPU over the minute; at the end (or when interrupted: the
# figures so far), the first, last and largest of each, the scans done and
# the processes churned. The churn and watch are this script's children,
# ended however it ends.
# Usage: tests/bench/watch_soak.sh [SCANS] [INTERVAL] [KDIAG]
set -euo pipefail
scans=${1:-17280}
interval=${2:-1}
kdiag=${3:-target/release/kdiag}
secs=$((scans * interval))
hz=$(getconf CLK_TCK)
dir=$(mktemp -d)
churn=""
watch=""
started=$(date +%s)
rss=()
fds=()
cpu=()
churned() { cat "$dir/churned" 2>/dev/null || echo 0; }
summary() {
  local now n max_rss=0 max_fds=0 r f total
  now=$(date +%s)
  n=${#rss[@]}
  [ "$n" -gt 0 ] || return 0
  for r in "${rss[@]}"; do [ "$r" -gt "$max_rss" ] && max_rss=$r; done
  for f in "${fds[@]}"; do [ "$f" -gt "$max_fds" ] && max_fds=$f; done
  total=$(awk -v t="$last_ticks" -v hz="$hz" -v s="$((now - started))" \
    'BEGIN { printf "%.2f", 100 * t / hz / (s > 0 ? s : 1) }')
  echo "soak: about $(((now - started) / interval)) scans (the time over the interval) of $scans at ${interval} s in $((now - started)) s;" \
    "$(churned) processes churned"
  echo "soak: RSS ${rss[0]} KiB at start, ${rss[n - 1]} KiB at the end, ${max_rss} KiB at most"
  echo "soak: descriptors ${fds[0]} at start, ${fds[n - 1]} at the end, ${max_fds} at most"
  echo "soak: CPU ${total}% of one CPU over the run; by minute, at most $(printf '%s\n' "${cpu[@]}" | sort -g | tail -1)%"
}
cleanup() {
  # shellcheck disable=SC2046
  kill $(jobs -p) 2>/dev/null || true
  wait 2>/dev/null || true
  summary
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

# Batches of 10 processes living 0.1 s, each naming itself, twice a second.
(
  i=0
  while :; do
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      sh -c "echo soak-$i > /proc/self/comm; exec sleep 0.1" &
      i=$((i + 1))
    done
    wait
    echo "$i" >"$dir/churned.new" && mv "$dir/churned.new" "$dir/churned"
    sleep 0.4
  done
) &
churn=$!

"$kdiag" watch --interval "$interval" --duration "$secs" --textfile "$dir" >/dev/null &
watch=$!
ticks() { awk '{ print $14 + $15 }' "/proc/$watch/stat" 2>/dev/null || echo ""; }
sample() {
  local t r f
  t=$(ticks)
  r=$(awk '/^VmRSS/ { print $2 }' "/proc/$watch/status" 2>/dev/null || true)
  f=$(ls "/proc/$watch/fd" 2>/dev/null | wc -l)
  [ -n "$t" ] && [ -n "$r" ] || return 1
  cpu+=("$(awk -v a="$t" -v b="$last_ticks" -v hz="$hz" -v s="$1" 'BEGIN { printf "%.2f", 100 * (a - b) / hz / s }')")
  last_ticks=$t
  rss+=("$r")
  fds+=("$f")
  echo "$(date -u +%H:%M:%S) +$(($(date +%s) - started)) s: RSS $r KiB, $f descriptors," \
    "CPU ${cpu[-1]}%, $(churned) processes churned"
}
last_ticks=0
# The first figures once watch has scanned a few times, then every minute.
sleep 5 & wait $!
sample 5
while kill -0 "$watch" 2>/dev/null; do
  sleep 60 & wait $!
  sample 60 || break
done
