# CPython computing in one thread, in a function of its own: CPU-bound in
# the interpreter, and its Python function named (read from its memory, no
# -X perf). Truth: py-spy dump --nonblocking (never stops it), the
# innermost Python function of each thread; pidstat, ~100% CPU in one thread.
EXPECT=cpu
EVIDENCE="hottest function: spin (<string>:3) in Python"
QUICK=1
NEEDS=py-spy
start() {
    python3 -c '
def spin():
    while True: sum(range(10000))
spin()' &
    PID=$!; CLEANUP="kill $PID"
}
truth() { echo "py-spy: $(py_spy_innermost "$PID");"; default_truth; }
