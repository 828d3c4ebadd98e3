#!/usr/bin/env bash
# The cost of `kdiag watch` with 2,000 extra sleeping processes: its CPU
# time and peak RSS over a run (default 60 s at the default 5 s interval),
# from /usr/bin/time; then, on the same run, the same for process-exporter
# (Debian's prometheus-process-exporter, where installed: its defaults and
# without smaps, one group per process name as watch groups them), scraped every 5 s as
# Prometheus would (it reads /proc when scraped). The sleepers and the
# exporter are this script's own children, killed however it ends.
# Usage: tests/bench/watch_cost.sh [KDIAG] [SECONDS]
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

peer=$(command -v prometheus-process-exporter || true)
if [ -z "$peer" ]; then
  echo "process-exporter: not installed (apt-get install prometheus-process-exporter)"
  exit 0
fi
printf 'process_names:\n  - name: "{{.Comm}}"\n    cmdline: [".+"]\n' >"$dir/pe.yml"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# $1: the exporter's flags beside the address and the configuration.
peer_run() {
  /usr/bin/time -f "process-exporter $*: user %U s, system %S s, wall %e s, peak RSS %M KiB" \
    timeout -s INT "$secs" "$peer" -config.path "$dir/pe.yml" \
    -web.listen-address "127.0.0.1:$port" "$@" >/dev/null 2>"$dir/pe.err" &
  pids+=($!)
  for _ in $(seq $((secs / 5))); do
    sleep 5
    curl -sf "http://127.0.0.1:$port/metrics" >"$dir/pe.new" && mv "$dir/pe.new" "$dir/pe.prom" || true
  done
  wait "${pids[-1]}" || true
  grep -h "^process-exporter" "$dir/pe.err"
  echo "  its groups: $(grep -c '^namedprocess_namegroup_num_procs' "$dir/pe.prom" 2>/dev/null || true)"
}
# Its defaults (smaps and per-thread metrics read too), then without smaps.
peer_run
peer_run -gather-smaps=false
