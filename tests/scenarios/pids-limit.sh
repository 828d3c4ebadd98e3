# Python forking children that sleep, in a v1 pids cgroup of 4: most forks
# fail with EAGAIN, which it catches and retries. Truth: the cgroup's
# pids.events max count.
EXPECT=pids-limit
EVIDENCE="forks refused by its cgroup's pids.max"
start() {
    cg_new pids; echo 4 > "$CG/pids.max"
    cg_spawn "python3 -c '
import os, time
while True:
    try:
        if os.fork() == 0:
            time.sleep(3); os._exit(0)
    except OSError:
        pass
    time.sleep(0.05)
    try: os.waitpid(-1, os.WNOHANG)
    except ChildProcessError: pass
'"
    ARGS="-p $PID --tree"; CLEANUP="cg_cleanup"
}
truth() { local a; a=$(awk '{print $2}' "$CG/pids.events"); sleep 5; echo "pids.events: $(( $(awk '{print $2}' "$CG/pids.events") - a )) forks refused in 5 s"; }
