# Four threads of pure Python: one holds the GIL at a time, the others
# wait for it, back in the Python function they run. Truth: py-spy dump
# --nonblocking (never stops it), the innermost Python function of each
# thread; pidstat -t, the threads share about one CPU.
EXPECT=lock
EVIDENCE="CPython: the GIL (take_gil, taken in spin (<string>:4))"
NEEDS=py-spy
start() {
    python3 -c '
import threading
def spin():
    while True: sum(range(1000))
ts=[threading.Thread(target=spin) for _ in range(4)];[t.start() for t in ts];[t.join() for t in ts]' &
    PID=$!; CLEANUP="kill $PID"
}
truth() { echo "py-spy: $(py_spy_innermost "$PID");"; default_truth; }
