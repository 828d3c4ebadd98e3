#!/usr/bin/env bash
# The cost of `kdiag profile --wall` against its two halves alone and
# against perf, on one workload (wall_load.c: two threads handing a turn to
# each other through a condition variable, computing on each turn; both
# pinned to CPU 1 with their tracer). The measure is CPU time, which other
# load on the machine inflates far less than wall time: the whole command's
# (tracer plus workload, from /usr/bin/time: the tracer waits for its
# `-- CMD`), less the same round's bare workload. BPF programs run in the
# workload's context, so their time is in that difference too. Modes run in
# rounds, their order rotated each round; the report gives each mode's
# median extra CPU and the ratios docs/PERFORMANCE.md quotes.
# Run as root: tests/bench/wall_cost.sh [KDIAG] [ROUNDS] [TRIPS]
set -euo pipefail
kdiag=$(realpath "${1:-target/release/kdiag}")
rounds=${2:-5}
trips=${3:-50000}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/kdiag-wall-cost.XXXXXX)
trap 'rm -rf "$dir"' EXIT
gcc -O2 -pthread -fno-omit-frame-pointer -o "$dir/load" "$here/wall_load.c"
load=("$dir/load" "$trips")

# perf here: does `perf record --off-cpu` work (needs BUILD_BPF_SKEL=1)?
offcpu_perf=no
if command -v perf >/dev/null; then
  said=$(perf record --off-cpu -o "$dir/probe.data" -- true 2>&1 || true)
  case $said in *"is being ignored"*|*"unknown option"*) ;; *) offcpu_perf=yes ;; esac
fi

modes=(bare profile offcpu wall_no_wakers wall perf)
[ "$offcpu_perf" = yes ] && modes+=(perf_offcpu)

run() {
  local cmd
  case $1 in
    bare) cmd=("${load[@]}") ;;
    profile) cmd=("$kdiag" profile -F 99 --folded "$dir/p.folded" -- "${load[@]}") ;;
    offcpu) cmd=("$kdiag" offcpu --folded "$dir/o.folded" -- "${load[@]}") ;;
    wall_no_wakers) cmd=("$kdiag" profile --wall --no-wakers --folded "$dir/w.folded" -- "${load[@]}") ;;
    wall) cmd=("$kdiag" profile --wall --folded "$dir/w.folded" -- "${load[@]}") ;;
    perf) cmd=(perf record -q -g -F 99 -o "$dir/perf.data" -- "${load[@]}") ;;
    perf_offcpu) cmd=(perf record -q -g -F 99 --off-cpu -o "$dir/perf.data" -- "${load[@]}") ;;
  esac
  /usr/bin/time -f "%U %S" -o "$dir/time" taskset -c 1 "${cmd[@]}" >/dev/null 2>"$dir/err" ||
    { cat "$dir/err" >&2; exit 1; }
  awk '{ printf "%.3f\n", $1 + $2 }' "$dir/time"
}

declare -A extra
for r in $(seq "$rounds"); do
  # Rotate the order each round so that drift does not favour one mode.
  order=("${modes[@]:r % ${#modes[@]}}" "${modes[@]:0:r % ${#modes[@]}}")
  declare -A cpu=()
  for m in "${order[@]}"; do cpu[$m]=$(run "$m"); done
  line="round $r: bare ${cpu[bare]} s"
  for m in "${modes[@]:1}"; do
    d=$(echo "${cpu[$m]} - ${cpu[bare]}" | bc -l)
    extra[$m]+="$d "
    line+=", $m +$(printf %.3f "$d") s"
  done
  echo "$line"
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo
echo "median extra CPU over the bare workload ($trips trips, $rounds rounds):"
declare -A med
for m in "${modes[@]:1}"; do
  med[$m]=$(echo "${extra[$m]}" | median)
  printf "  %-16s %+.3f s\n" "$m" "${med[$m]}"
done
ratio() { echo "scale=2; $1 / $2" | bc -l; }
halves=$(echo "${med[profile]} + ${med[offcpu]}" | bc -l)
echo
echo "wall / (profile + offcpu):   $(ratio "${med[wall]}" "$halves")"
echo "wall without wakers / (profile + offcpu): $(ratio "${med[wall_no_wakers]}" "$halves")"
echo "wall / perf record -g:       $(ratio "${med[wall]}" "${med[perf]}")"
echo "wakers' own cost:            $(echo "${med[wall]} - ${med[wall_no_wakers]}" | bc -l) s"
if [ "$offcpu_perf" = yes ]; then
  echo "wall / perf record -g --off-cpu: $(ratio "${med[wall]}" "${med[perf_offcpu]}")"
else
  echo "perf record --off-cpu: not supported by this perf (built without BUILD_BPF_SKEL=1)"
fi
