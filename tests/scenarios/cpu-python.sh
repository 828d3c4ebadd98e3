# CPython computing in one thread: CPU-bound in the interpreter. Truth:
# pidstat, ~100% CPU in one thread.
EXPECT=cpu
EVIDENCE="on CPU"
QUICK=1
start() { python3 -c 'while True: sum(i * i for i in range(10000))' & PID=$!; CLEANUP="kill $PID"; }
