# An idle ThreadPoolExecutor (4 workers waiting for work), the main
# thread asleep: idle by design. Truth: pidstat -t (not py-spy dump: it stops the target with ptrace).
EXPECT=idle
EVIDENCE="an event (a lock no working thread held)"
start() {
    python3 -c 'import concurrent.futures as f,time;e=f.ThreadPoolExecutor(4);[e.submit(time.sleep,0) for _ in range(8)];time.sleep(60)' &
    PID=$!; CLEANUP="kill $PID"
}
