# A main thread in Thread.join() on a thread that sleeps: idle by design.
# Truth: pidstat -t, no thread uses CPU (not py-spy dump: it stops the target with ptrace).
EXPECT=idle
EVIDENCE="an event (a lock no working thread held)"
QUICK=1
start() {
    python3 -c 'import threading,time;t=threading.Thread(target=time.sleep,args=(60,));t.start();t.join()' &
    PID=$!; CLEANUP="kill $PID"
}
