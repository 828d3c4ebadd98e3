// Four threads taking turns at one monitor, each holding it for 2 ms (a
// sleep: the holder waits on something else while it holds the lock, a
// classic), so the other three are BLOCKED on `synchronized`, parked in
// ObjectMonitor::enter, whatever the load on the machine.
public class Contend {
    static final Object LOCK = new Object();

    public static void main(String[] args) throws Exception {
        for (int i = 0; i < 4; i++) {
            Thread t = new Thread(() -> {
                while (true) {
                    synchronized (LOCK) {
                        try {
                            Thread.sleep(2);
                        } catch (InterruptedException e) {
                            return;
                        }
                    }
                }
            });
            t.setDaemon(true);
            t.start();
        }
        System.out.println("ready");
        Thread.sleep(600_000);
    }
}
