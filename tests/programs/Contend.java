// Four threads taking turns at one monitor, each holding it for 2 ms (a
// sleep: the holder waits on something else while it holds the lock, a
// classic), so the other three are BLOCKED on `synchronized`, parked in
// ObjectMonitor::enter, whatever the load on the machine. The monitor is
// taken by a method of its own, called 500 times a second: the JIT
// compiles it within a second, and a perf map names it (`Contend.work`).
public class Contend {
    static synchronized void work() throws InterruptedException {
        Thread.sleep(2);
    }

    public static void main(String[] args) throws Exception {
        for (int i = 0; i < 4; i++) {
            Thread t = new Thread(() -> {
                try {
                    while (true) {
                        work();
                    }
                } catch (InterruptedException e) {
                }
            });
            t.setDaemon(true);
            t.start();
        }
        System.out.println("ready");
        Thread.sleep(600_000);
    }
}
