# The bundled lock-contend workload: threads serialised on one mutex held
# while sleeping. Truth: its own description; ps, all threads S.
EXPECT=lock
EVIDENCE="mutex"
start() { "$WORKLOADS/lock-contend" & PID=$!; CLEANUP="kill $PID"; }
truth() { echo "ps: $(thread_states $PID); $(default_truth)"; }
