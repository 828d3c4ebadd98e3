# The oom-kill-tree fault watched by its cgroup (--cgroup). Truth:
# memory.oom_control's oom_kill count.
EXPECT=oom-kill
EVIDENCE="killed 1 process"
start() {
    cg_new memory; echo $((32 << 20)) > "$CG/memory.limit_in_bytes"
    cg_spawn "sh -c '$(c_program grow) 1500; exec sleep 60'"
    ARGS="--cgroup $CG"; CLEANUP="cg_cleanup"
}
truth() { sleep 5; echo "memory.oom_control: $(grep oom_kill "$CG/memory.oom_control" | tr '\n' ' ')"; }
