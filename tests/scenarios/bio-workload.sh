# The bundled bio workload run on its own (no limit set): 20 threads of
# tiny synchronous O_DIRECT reads, waiting for the device. Truth: ps,
# threads in D; the process's cgroup has no blkio limit.
EXPECT=io
EVIDENCE="__iomap_dio_rw"
start() { "$WORKLOADS/bio" > /dev/null 2>&1 & PID=$!; CLEANUP="kill $PID"; sleep 1; }
truth() {
    echo "ps: $(thread_states $PID); blkio limits: $(cat /sys/fs/cgroup/blkio$(awk -F: '$2 == "blkio" {print $3}' /proc/$PID/cgroup)/blkio.throttle.read_iops_device 2>/dev/null | wc -l)"
    sleep 5
}
