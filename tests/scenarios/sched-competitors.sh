# A spin loop and three stress-ng CPU hogs pinned to one CPU: the target
# waits for that CPU. Truth: pidstat, the target at ~25% of a CPU, the
# rest runnable (its schedstat run_delay).
EXPECT=sched
EVIDENCE="stress-ng"
QUICK=1
NEEDS=stress-ng
start() {
    taskset -c 0 stress-ng --cpu 3 --cpu-method int64 -q & HOGS=$!
    taskset -c 0 sh -c 'while :; do :; done' & PID=$!
    CLEANUP="kill $PID; kill $HOGS"
}
truth() {
    local a b; a=$(awk '{print $2}' /proc/$PID/schedstat); sleep 5; b=$(awk '{print $2}' /proc/$PID/schedstat)
    echo "schedstat: run_delay $(( (b - a) / 50000000 ))% of 5 s; $(default_truth)"
}
