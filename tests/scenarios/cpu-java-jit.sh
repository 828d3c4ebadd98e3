# A Java loop compiled by the JIT: CPU-bound in JIT code. Truth: pidstat,
# ~100% CPU in one thread.
EXPECT=cpu
EVIDENCE="on CPU"
NEEDS=java
start() {
    cat > "$work/Spin.java" <<'J'
public class Spin { public static void main(String[] a) { long s = 0; while (true) { for (int i = 0; i < 1000000; i++) s += i * 31L ^ s; if (s == 42) System.out.println(s); } } }
J
    java "$work/Spin.java" & PID=$!; CLEANUP="kill $PID"
    sleep 3
}
