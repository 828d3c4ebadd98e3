# A JVM at -Xmx64m keeping ~56 MiB live while allocating: back-to-back
# full GCs. Truth: jstat -gcutil, old gen near full and the full-GC count
# rising every second.
EXPECT=cpu
EVIDENCE="garbage collector (GC) ran"
NEEDS="java jstat"
start() {
    cat > "$work/Heap.java" <<'J'
import java.util.*;
public class Heap { public static void main(String[] a) { List<byte[]> keep = new ArrayList<>(); long n = 0;
  while (true) { byte[] b = new byte[64 * 1024]; if (keep.size() < 880) keep.add(b); else keep.set((int) (n++ % 880), b); } } }
J
    java -Xmx64m -XX:+UseSerialGC "$work/Heap.java" & PID=$!; CLEANUP="kill $PID"; sleep 3
}
truth() {
    local a b; a=$(jstat -gcutil $PID | awk 'NR == 2 {print $4, $9}'); sleep 5; b=$(jstat -gcutil $PID | awk 'NR == 2 {print $4, $9}')
    set -- $a $b; echo "jstat -gcutil: old gen $3%, $(( ${4%.*} - ${2%.*} )) full GCs in 5 s"
}
