#!/usr/bin/env bash
# The cost of `kdiag watch` with 2,000 extra sleeping processes: its CPU
# time and peak RSS over a run (default 60 s at the default 5 s interval),
# from /usr/bin/time. The sleepers are this script's own children, killed
# however it ends. Usage: tests/bench/watch_cost.sh [KDIAG] [SECONDS]
set -euo pipefail
kdiag=${1:-target/release/kdiag}
secs=${2:-60}
pids=()
dir=$(mktemp -d)
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
for _ in $(seq 2000); do sleep 3600 & pids+=($!); done
echo "processes on the machine: $(ls -d /proc/[0-9]* | wc -l)"
/usr/bin/time -f "watch: user %U s, system %S s, wall %e s, peak RSS %M KiB" \
  "$kdiag" watch --duration "$secs" --textfile "$dir" >/dev/null
