# Three pthreads taking one rwlock for writing and one for reading, each
# computing ~2 ms under it (tests/programs/rwlock_compute.c): writers
# queue behind each other and the reader. Truth: pidstat -t, about one CPU
# in all across four threads.
EXPECT=lock
EVIDENCE="rwlock"
start() {
    c_program rwlock_compute > /dev/null
    "$work/rwlock_compute" 3 1 &
    PID=$!; CLEANUP="kill $PID"
}
