#!/usr/bin/env bash
# The whole cost of one `kdiag diagnose` run on 1,000 threads, drill-downs
# included (--why all: CPU profile, off-CPU profile, block I/O trace, CPU
# competition, exec trace), measured from outside by /usr/bin/time, not by
# kdiag's own count: its CPU over the window as a share of one CPU, and its
# peak RSS (and, from its report, the memory of its BPF maps). The target
# (tests/programs/many_threads.c, 1,000 threads waking once a second) is
# this script's child, killed however it ends.
# Usage (as root, for the drill-downs): tests/bench/diagnose_cost.sh [KDIAG] [SECONDS] [ROUNDS]
set -euo pipefail
kdiag=${1:-target/release/kdiag}
secs=${2:-5}
rounds=${3:-3}
dir=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
cc -O2 -pthread -o "$dir/many_threads" "$(dirname "$0")/../programs/many_threads.c"
"$dir/many_threads" 1000 & pid=$!
while [ "$(ls /proc/$pid/task | wc -l)" -lt 1001 ]; do sleep 0.1; done
for r in $(seq "$rounds"); do
  /usr/bin/time -o "$dir/time" -f "%U %S %e %M" \
    "$kdiag" diagnose --json --why all -d "$secs" -p "$pid" >"$dir/out.json"
  read -r user sys wall rss <"$dir/time"
  own=$(python3 -c "import json; c=json.load(open('$dir/out.json'))['observation']['cost']; print(f\"{c['run_cpu_s']:.3f} {c['max_rss_kib']} {(c.get('bpf') or {}).get('map_bytes', 0)}\")")
  awk -v u="$user" -v s="$sys" -v w="$wall" -v m="$rss" -v d="$secs" -v own="$own" -v r="$r" 'BEGIN {
    split(own, o, " ");
    printf "round %d: /usr/bin/time: user %.2f s + system %.2f s in %.1f s wall = %.2f%% of one CPU over the %d s window (%.2f%% over the wall time), peak RSS %.1f MiB; kdiag'"'"'s own count: %.3f s CPU, %.1f MiB, BPF maps %.1f MiB\n",
      r, u, s, w, (u + s) * 100 / d, d, (u + s) * 100 / w, m / 1024, o[1], o[2] / 1024, o[3] / 1048576 }'
done
