# A process that sleeps 2.5 s, then grows 1 MiB every 10 ms in a 32 MiB
# v1 memory cgroup, watched alone with -p: it is OOM-killed in the window,
# and the verdict names it. Truth: memory.oom_control's oom_kill count.
EXPECT=oom-kill
EVIDENCE="(grow)"
start() {
    cg_new memory; echo $((32 << 20)) > "$CG/memory.limit_in_bytes"
    cg_spawn "$(c_program grow) 2500"
    CLEANUP="cg_cleanup"
}
truth() { sleep 5; echo "memory.oom_control: $(grep oom_kill "$CG/memory.oom_control" | tr '\n' ' ')"; }
