# A threading.Timer that fires in 10 minutes and a main thread joining it:
# asleep by design. Truth: pidstat -t (not py-spy dump: it stops the target with ptrace).
EXPECT=idle
EVIDENCE="sleeping by design"
start() {
    python3 -c '
import threading
t = threading.Timer(600, print); t.start(); t.join()' &
    PID=$!; CLEANUP="kill $PID"
}
