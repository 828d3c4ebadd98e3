# The default truth of a process scenario, measured without kdiag: the
# CPU of each thread (pidstat -t, 5 s) and, where installed, py-spy's
# stacks of a Python target (what each thread's Python code waits in).
truth() {
    local cpu
    cpu=$(pidstat -t -p "$PID" 5 1 | awk '$NF ~ /^\|__/ {n++; s += $(NF-2)} END {printf "%d threads, %.0f%% CPU in all", n, s}')
    echo -n "pidstat: $cpu"
    if command -v py-spy > /dev/null && grep -q python "/proc/$PID/comm" 2>/dev/null; then
        echo -n "; py-spy: $(py-spy dump --pid "$PID" 2>/dev/null | grep -oE '^ +[a-z_]+ \(' | sort | uniq -c | sort -rn | head -2 | awk '{printf "%s×%s ", $2, $1}')"
    fi
    echo
}
