# Four Java threads taking turns at one synchronized block
# (tests/programs/Contend.java). Truth: jstack, three threads BLOCKED on
# the monitor.
EXPECT=lock
EVIDENCE="a monitor (synchronized)"
QUICK=1
NEEDS="java jstack"
start() { java "$root/tests/programs/Contend.java" & PID=$!; CLEANUP="kill $PID"; sleep 3; }
truth() { sleep 2; echo "jstack: $(jstack $PID | grep -c 'BLOCKED (on object monitor)') threads BLOCKED on a monitor; $(default_truth)"; }
