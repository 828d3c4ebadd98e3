# Four pthreads taking one mutex in turn, computing ~2 ms under it
# (tests/programs/lock_compute.c): a convoy. Truth: pidstat -t, about one
# CPU in all; pidstat -w, voluntary switches on every hand-over.
EXPECT=lock
EVIDENCE="mutex"
QUICK=1
start() {
    c_program lock_compute > /dev/null
    "$work/lock_compute" 4 &
    PID=$!; CLEANUP="kill $PID"
}
