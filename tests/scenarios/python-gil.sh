# Four threads of pure Python: one holds the GIL at a time, the others
# wait for it. Truth: pidstat -t, the threads share about one CPU (not py-spy dump: it stops the target with ptrace).
EXPECT=lock
EVIDENCE="CPython: the GIL"
start() {
    python3 -c '
import threading
def spin():
    while True: sum(range(1000))
ts=[threading.Thread(target=spin) for _ in range(4)];[t.start() for t in ts];[t.join() for t in ts]' &
    PID=$!; CLEANUP="kill $PID"
}
