# The bundled cpu-burn workload (user mode). Truth: pidstat, ~100% CPU.
EXPECT=cpu
EVIDENCE="on CPU"
start() { "$WORKLOADS/cpu-burn" & PID=$!; CLEANUP="kill $PID"; }
