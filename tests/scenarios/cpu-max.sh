# A spin loop under a CPU quota of 5% (cgroup v2 cpu.max, else v1
# cfs_quota_us). Truth: the cgroup's own cpu.stat, throttled in nearly
# every period.
EXPECT=cpu-quota
EVIDENCE="throttled in"
QUICK=1
start() {
    if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        CG=/sys/fs/cgroup/kdiag-scenario-$$; mkdir "$CG"; echo "5000 100000" > "$CG/cpu.max"
    else
        CG=/sys/fs/cgroup/cpu/kdiag-scenario-$$; mkdir "$CG"
        echo 100000 > "$CG/cpu.cfs_period_us"; echo 5000 > "$CG/cpu.cfs_quota_us"
    fi
    sh -c "echo \$\$ > $CG/cgroup.procs; exec sh -c 'while :; do :; done'" &
    PID=$!; CLEANUP="kill $PID; wait $PID 2>/dev/null; rmdir $CG"
}
truth() { echo "cpu.stat: $(throttled_truth)"; }
