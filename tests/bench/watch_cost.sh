#!/usr/bin/env bash
# The cost of `kdiag watch` over a machine with many sleeping processes
# (default 10,000, forked by sleepers.c) at a scan a second: its CPU time
# and peak RSS over a run (default 60 s), from /usr/bin/time, on each of
# its tiers (the BPF task iterator, then /proc); then, on the same run and
# the same processes, the same for its peers, each scraped every interval
# as Prometheus would (they read /proc when scraped): process-exporter
# (Debian's prometheus-process-exporter, one group per process name as
# watch groups them; its defaults and without smaps) and node_exporter's
# processes collector alone (prometheus-node-exporter). A peer not
# installed is said and skipped. The sleepers and the exporters are this
# script's own children, killed however it ends.
# Usage: tests/bench/watch_cost.sh [KDIAG] [SECONDS] [PROCESSES] [INTERVAL]
set -euo pipefail
kdiag=${1:-target/release/kdiag}
secs=${2:-60}
procs=${3:-10000}
every=${4:-1}
here=$(dirname "$0")
pids=()
dir=$(mktemp -d)
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
gcc -O2 -o "$dir/sleepers" "$here/sleepers.c"
"$dir/sleepers" "$procs" >"$dir/sleepers.out" &
pids+=($!)
until grep -q ready "$dir/sleepers.out" 2>/dev/null; do sleep 0.2; done
echo "sleepers: $(cat "$dir/sleepers.out"); processes on the machine: $(ls -d /proc/[0-9]* | wc -l)"

for tier in bpf proc; do
  /usr/bin/time -f "kdiag watch --tier $tier: user %U s, system %S s, wall %e s, peak RSS %M KiB" \
    "$kdiag" watch --interval "$every" --tier "$tier" --duration "$secs" --textfile "$dir" >/dev/null
  echo "  its processes: $(grep '^kdiag_watch_processes' "$dir/kdiag.prom" | cut -d' ' -f2)"
done

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# $1: the label, $2: the series counted, then the exporter's command line.
# Started under /usr/bin/time, scraped every interval, stopped after $secs.
peer_run() {
  local label=$1 series=$2
  shift 2
  /usr/bin/time -f "$label: user %U s, system %S s, wall %e s, peak RSS %M KiB" \
    timeout -s INT "$secs" "$@" >/dev/null 2>"$dir/peer.err" &
  pids+=($!)
  local end=$((SECONDS + secs))
  while [ $SECONDS -lt $end ]; do
    sleep "$every"
    curl -sf -m 30 "http://127.0.0.1:$port/metrics" >"$dir/peer.new" && mv "$dir/peer.new" "$dir/peer.prom" || true
  done
  wait "${pids[-1]}" || true
  grep -h "^$label" "$dir/peer.err"
  echo "  $series: $(grep -v '^#' "$dir/peer.prom" 2>/dev/null | grep -c "^$series" || true)"
}

if pe=$(command -v prometheus-process-exporter); then
  printf 'process_names:\n  - name: "{{.Comm}}"\n    cmdline: [".+"]\n' >"$dir/pe.yml"
  # Its defaults (smaps and per-thread metrics read too), then without smaps.
  peer_run "process-exporter" namedprocess_namegroup_num_procs \
    "$pe" -config.path "$dir/pe.yml" -web.listen-address "127.0.0.1:$port"
  peer_run "process-exporter -gather-smaps=false" namedprocess_namegroup_num_procs \
    "$pe" -config.path "$dir/pe.yml" -web.listen-address "127.0.0.1:$port" -gather-smaps=false
else
  echo "process-exporter: not installed (apt-get install prometheus-process-exporter)"
fi
if ne=$(command -v prometheus-node-exporter); then
  peer_run "node_exporter --collector.processes" node_processes_state \
    "$ne" --collector.disable-defaults --collector.processes \
    --web.listen-address "127.0.0.1:$port"
else
  echo "node_exporter: not installed (apt-get install prometheus-node-exporter)"
fi
