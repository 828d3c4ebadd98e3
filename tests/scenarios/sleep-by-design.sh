# sleep 600: asleep on a timer. Truth: ps, state S; pidstat, 0% CPU.
EXPECT=idle
EVIDENCE="sleeping by design"
QUICK=1
start() { sleep 600 & PID=$!; CLEANUP="kill $PID"; }
truth() { echo "ps: $(thread_states $PID); $(default_truth)"; }
