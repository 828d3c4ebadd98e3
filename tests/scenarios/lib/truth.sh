# The default truth of a process scenario, measured without kdiag: the
# CPU of each thread (pidstat -t, 5 s) and, where installed, py-spy's
# stacks of a Python target (what each thread's Python code waits in).
truth() {
    local cpu
    if command -v py-spy > /dev/null && grep -q python "/proc/$PID/comm" 2>/dev/null; then
        # Each thread's innermost Python frame.
        echo -n "py-spy: $(py-spy dump --pid "$PID" 2>/dev/null | awk '/^Thread/ {getline; print $1}' | sort | uniq -c | sort -rn | awk '{printf "%s%s %s", NR > 1 ? ", " : "", $1, $2}')"
    fi
    cpu=$(pidstat -t -p "$PID" 5 1 | awk '$1 != "Average:" && $NF ~ /^\|__/ {n++; s += $(NF-2)} END {printf "%d threads, %.0f%% CPU in all", n, s}')
    echo "; pidstat: $cpu"
}
