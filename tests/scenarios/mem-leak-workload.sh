# The bundled mem-leak workload: resident memory grows steadily. Truth:
# VmRSS sampled before and after.
EXPECT=memory-trend
EVIDENCE="grow"
start() { "$WORKLOADS/mem-leak" & PID=$!; CLEANUP="kill $PID"; }
truth() { local a b; a=$(awk '/VmRSS/ {print $2}' /proc/$PID/status); sleep 5; b=$(awk '/VmRSS/ {print $2}' /proc/$PID/status); echo "VmRSS: $a -> $b kB in 5 s"; }
