# A spin loop stopped by SIGSTOP. Truth: ps, state T.
EXPECT=stopped
EVIDENCE="stopped"
QUICK=1
start() { sh -c 'while :; do :; done' & PID=$!; kill -STOP $PID; CLEANUP="kill -9 $PID"; }
truth() { echo "ps: $(thread_states $PID)"; }
