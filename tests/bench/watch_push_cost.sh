#!/usr/bin/env bash
# The cost of watch's continuous profiles: `kdiag watch --textfile` over
# the whole machine for SECONDS (default 60) without profiles, then the
# same with `--pyroscope` (to tests/programs/pyroscope_receiver.py, which
# decodes every push) at the default 10 s period and 19 Hz, then at
# `--push-interval 1`: watch's CPU time and peak RSS (/usr/bin/time), and
# the time the off-CPU BPF program ran in the kernel, charged to the
# threads switching (kernel.bpf_stats_enabled for the run). The receiver
# and watch are this script's children, killed however it ends.
# Usage: tests/bench/watch_push_cost.sh [KDIAG] [SECONDS]
set -euo pipefail
kdiag=${1:-target/release/kdiag}
secs=${2:-60}
here=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d)
pids=()
stats=$(cat /proc/sys/kernel/bpf_stats_enabled)
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  echo "$stats" >/proc/sys/kernel/bpf_stats_enabled
  rm -rf "$dir"
}
trap cleanup EXIT
echo 1 >/proc/sys/kernel/bpf_stats_enabled
python3 "$here/tests/programs/pyroscope_receiver.py" >"$dir/pushes" &
pids+=($!)
until [ -s "$dir/pushes" ]; do sleep 0.1; done
port=$(head -1 "$dir/pushes")
echo "processes on the machine: $(ls -d /proc/[0-9]* | wc -l)"

# $1: a name; the rest: watch's extra options.
run() {
  local name=$1
  shift
  /usr/bin/time -f "$name: user %U s, system %S s, wall %e s, peak RSS %M KiB" \
    "$kdiag" watch --duration "$secs" --textfile "$dir" "$@" >/dev/null 2>"$dir/err" &
  pids+=($!)
  sleep $((secs - 2))
  # The off-CPU program's run time so far (it is detached at the end).
  local ns
  ns=$(bpftool prog show -j | python3 -c '
import json, sys
print(sum(p.get("run_time_ns", 0) for p in json.load(sys.stdin) if p.get("name", "").startswith("offcpu")))')
  wait "${pids[-1]}" || true
  grep -h "^$name" "$dir/err"
  echo "  off-CPU BPF program: $((ns / 1000000)) ms in the kernel over $((secs - 2)) s"
}
run "watch"
run "watch --pyroscope" --pyroscope "http://127.0.0.1:$port"
run "watch --pyroscope --push-interval 1" --pyroscope "http://127.0.0.1:$port" --push-interval 1
echo "pushes received: $(($(wc -l <"$dir/pushes") - 1)), refused: $(grep -c '"error"' "$dir/pushes" || true)"
