# A shell whose child grows 1 MiB every 10 ms in a 32 MiB v1 memory cgroup,
# watched as a tree: the child is OOM-killed. Truth: memory.oom_control's
# oom_kill count and the kernel log.
EXPECT=oom-kill
EVIDENCE="killed 1 process"
QUICK=1
start() {
    cg_new memory; echo $((32 << 20)) > "$CG/memory.limit_in_bytes"
    cg_spawn "sh -c '$(c_program grow) 1500; exec sleep 60'"
    ARGS="-p $PID --tree"; CLEANUP="cg_cleanup"
}
truth() { sleep 5; echo "memory.oom_control: $(grep oom_kill "$CG/memory.oom_control" | tr '\n' ' ')"; }
