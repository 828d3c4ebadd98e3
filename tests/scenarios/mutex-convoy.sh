# Four pthreads taking one mutex in turn, computing ~2 ms under it
# (tests/programs/lock_compute.c): a convoy. Truth: pidstat -t, about one
# CPU in all; pidstat -w, voluntary switches on every hand-over.
EXPECT=lock
EVIDENCE="mutex"
start() {
    cc -O1 -pthread -o "$work/lock_compute" "$root/tests/programs/lock_compute.c"
    "$work/lock_compute" 4 &
    PID=$!; CLEANUP="kill $PID"
}
. "$here/lib/truth.sh"
