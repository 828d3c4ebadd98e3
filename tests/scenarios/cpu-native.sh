# A shell spinning in a loop: CPU-bound native code. Truth: pidstat, ~100% CPU.
EXPECT=cpu
EVIDENCE="on CPU"
QUICK=1
start() { sh -c 'while :; do :; done' & PID=$!; CLEANUP="kill $PID"; }
