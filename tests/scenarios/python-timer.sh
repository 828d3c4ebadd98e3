# A threading.Timer that fires in 10 minutes and a main thread joining it:
# asleep by design. Truth: py-spy, the timer thread in Event.wait and the
# main thread in join; pidstat, no CPU.
EXPECT=idle
EVIDENCE="sleeping by design"
start() {
    python3 -c '
import threading
t = threading.Timer(600, print); t.start(); t.join()' &
    PID=$!; CLEANUP="kill $PID"
}
