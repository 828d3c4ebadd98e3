# A shell that starts one child after another, each computing ~0.5 s and
# exiting, watched as a tree: the CPU is the children's, though few live
# through the window. Truth: the children's CPU in the shell's cutime.
EXPECT=cpu
EVIDENCE="children"
start() { sh -c 'while :; do sh -c "i=0; while [ \$i -lt 100000 ]; do i=\$((i+1)); done"; done' & PID=$!; ARGS="-p $PID --tree"; CLEANUP="kill $PID"; }
truth() {
    local a b; a=$(awk '{print $16}' /proc/$PID/stat); sleep 5; b=$(awk '{print $16}' /proc/$PID/stat)
    echo "/proc/PID/stat: children's CPU $(( (b - a) * 100 / $(getconf CLK_TCK) / 5 ))% of 5 s"
}
