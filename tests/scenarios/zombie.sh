# A child that exited and a parent (Python, asleep) that never waits for
# it. Truth: ps, the child in state Z.
EXPECT=zombie
EVIDENCE="parent"
QUICK=1
start() {
    python_bg 'import os, time
p = os.fork()
if p == 0: os._exit(3)
print(p, flush=True); time.sleep(600)'
    PARENT=$PID; PID=$LINE; CLEANUP="kill $PARENT"
}
truth() { sleep 1; echo "ps: $(ps -o stat=,ppid= -p $PID)"; }
