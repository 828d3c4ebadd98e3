# Worker threads waiting on a threading.Event nobody sets, and a main
# thread in time.sleep: asleep by design. Truth: pidstat -t (not py-spy dump: it stops the target with ptrace).
EXPECT=idle
EVIDENCE="sleeping by design"
start() {
    python3 -c '
import threading, time
e = threading.Event()
for _ in range(3): threading.Thread(target=e.wait, daemon=True).start()
time.sleep(600)' &
    PID=$!; CLEANUP="kill $PID"
}
