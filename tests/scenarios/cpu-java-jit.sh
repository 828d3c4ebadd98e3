# A Java loop compiled by the JIT: CPU-bound in JIT code. Truth: pidstat,
# ~100% CPU in one thread; jstack, the main thread RUNNABLE in Spin.main.
# kdiag asks the JVM for its perf map (jcmd), which names the compiled loop.
EXPECT=cpu
EVIDENCE="hottest function: void Spin.main"
NEEDS="java jstack"
start() {
    cat > "$work/Spin.java" <<'J'
public class Spin { public static void main(String[] a) { long s = 0; while (true) { for (int i = 0; i < 1000000; i++) s += i * 31L ^ s; if (s == 42) System.out.println(s); } } }
J
    java "$work/Spin.java" & PID=$!; CLEANUP="kill $PID"
    sleep 3
}
truth() { sleep 2; echo "jstack: main $(jstack $PID | grep -A2 '^"main"' | grep -c 'at Spin.main') frame at Spin.main; $(default_truth)"; }
