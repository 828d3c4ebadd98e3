# Four threads in queue.get() on an empty queue, the main thread joining
# them: idle by design. Truth: pidstat -t, no CPU (not py-spy dump: it stops the target with ptrace).
EXPECT=idle
EVIDENCE="an event (a lock no working thread held)"
start() {
    python3 -c 'import queue,threading;q=queue.Queue();ts=[threading.Thread(target=q.get) for _ in range(4)];[t.start() for t in ts];[t.join() for t in ts]' &
    PID=$!; CLEANUP="kill $PID"
}
