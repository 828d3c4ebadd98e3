# Four Java threads taking turns at one synchronized method
# (tests/programs/Contend.java), compiled by the JIT within a second.
# Truth: jstack, three threads BLOCKED on the monitor, at Contend.work.
# kdiag asks the JVM for its perf map (jcmd) and names that method.
EXPECT=lock
EVIDENCE="a monitor (synchronized) (ObjectMonitor::enter, taken in Contend.work)"
QUICK=1
NEEDS="java jstack"
start() { java "$root/tests/programs/Contend.java" & PID=$!; CLEANUP="kill $PID"; sleep 3; }
truth() { sleep 2; echo "jstack: $(jstack $PID | grep -A1 'BLOCKED (on object monitor)' | grep -c 'at Contend.work') threads BLOCKED on a monitor at Contend.work; $(default_truth)"; }
