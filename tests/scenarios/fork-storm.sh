# A shell starting short-lived children as fast as it can, watched as a
# tree: the CPU is the children's. Truth: pidstat, forks per second
# (/proc/stat processes) and CPU.
EXPECT=cpu
EVIDENCE="a fork storm"
start() { sh -c 'while :; do /bin/true; done' & PID=$!; ARGS="-p $PID --tree"; CLEANUP="kill $PID"; }
truth() {
    local a b; a=$(awk '$1 == "processes" {print $2}' /proc/stat); sleep 5; b=$(awk '$1 == "processes" {print $2}' /proc/stat)
    echo "/proc/stat: $(( (b - a) / 5 )) forks/s on the machine"
}
