# Four Python threads taking one threading.Lock held across a sleep (I/O
# waits inside the lock): three wait for the lock while one holds it.
# Truth: pidstat -t (not py-spy dump: it stops the target with ptrace).
EXPECT=lock
EVIDENCE="a threading lock"
start() {
    python3 -c '
import threading, time
l = threading.Lock()
def work():
    while True:
        with l:
            time.sleep(0.01)
            sum(range(20000))
ts = [threading.Thread(target=work) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]' &
    PID=$!; CLEANUP="kill $PID"
}
