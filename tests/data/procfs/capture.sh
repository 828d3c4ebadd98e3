#!/usr/bin/env bash
# Capture the /proc files kdiag's process readers use, for the given PIDs,
# into DIR (a fixture tree read through procfs::Reader::with_root).
# Usage: capture.sh DIR PID...
set -euo pipefail
out=$1; shift
mkdir -p "$out"
for f in stat uptime loadavg meminfo; do cat /proc/$f > "$out/$f"; done
for pid in "$@"; do
  d=$out/$pid
  mkdir -p "$d/task"
  for f in stat status cmdline io; do cat /proc/$pid/$f > "$d/$f" 2>/dev/null || true; done
  for t in /proc/$pid/task/*; do
    tid=${t##*/}
    mkdir -p "$d/task/$tid"
    for f in stat status; do cat "$t/$f" > "$d/task/$tid/$f"; done
  done
done
