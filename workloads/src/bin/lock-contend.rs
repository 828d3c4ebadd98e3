//! lock-contend: the lock-bound case. N threads serialise on one mutex that
//! its holder keeps while sleeping, so at any moment one thread sleeps in
//! nanosleep holding the lock and the others sleep in futex waiting for it:
//! little CPU, little progress.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kdiag_workloads::{Cli, Ctx, Json, Rng, Storage, Workload};

struct LockContend {
    threads: u64,
    hold: Duration,
}

impl Workload for LockContend {
    const NAME: &'static str = "lock-contend";
    const STORAGE: Storage = Storage::None;
    const USAGE: &'static str = "[--threads N] [--hold D]\n\n\
        N threads (default 4) take one std::sync::Mutex in turn and hold it\n\
        while sleeping D (default 20ms).";
    const OPTIONS: &'static [&'static str] = &["--threads", "--hold"];

    fn from_cli(cli: &Cli) -> Result<Self, String> {
        let mut rng = Rng::new(cli.seed(), "lock-contend");
        let (threads, hold_ms) = if cli.seeded() {
            (rng.range(3, 8), rng.range(10, 40))
        } else {
            (4, 20)
        };
        let threads = cli.try_value("--threads")?.unwrap_or(threads);
        if !(2..=64).contains(&threads) {
            return Err("--threads must be between 2 and 64".into());
        }
        let hold = match cli.raw("--hold") {
            Some(s) => {
                kdiag_workloads::cli::parse_duration(s).ok_or(format!("--hold: bad value {s:?}"))?
            }
            None => Duration::from_millis(hold_ms),
        };
        Ok(LockContend { threads, hold })
    }

    fn expect(&self, _scratch: &Path) -> Json {
        Json::obj([
            ("class", Json::str("lock")),
            (
                "summary",
                Json::str(
                    "threads serialised on one mutex held while sleeping: they wait in futex, CPU idle",
                ),
            ),
            ("threads", Json::Int(self.threads as i64)),
            ("thread_name_prefix", Json::str("lock-worker-")),
            ("hold_ms", Json::Num(self.hold.as_secs_f64() * 1000.0)),
            ("wait_syscall", Json::str("futex")),
            ("holder_syscall", Json::str("clock_nanosleep")),
            ("state", Json::str("S")),
            ("lock_function", Json::str("lock_hold_and_sleep")),
            ("cpu_bound", Json::Bool(false)),
        ])
    }

    fn run(&self, ctx: &Ctx) -> Result<(), String> {
        eprintln!(
            "lock-contend: pid {} {} threads sharing one mutex held {:?} at a time",
            std::process::id(),
            self.threads,
            self.hold
        );
        let lock = Mutex::new(0u64);
        let deadline = ctx.deadline;
        std::thread::scope(|s| {
            for t in 0..self.threads {
                let (lock, hold) = (&lock, self.hold);
                std::thread::Builder::new()
                    .name(format!("lock-worker-{t}"))
                    .spawn_scoped(s, move || {
                        while deadline.is_none_or(|d| Instant::now() < d) {
                            lock_hold_and_sleep(lock, hold);
                            // A moment outside the lock, so the woken waiter
                            // can take it instead of this thread again.
                            std::thread::sleep(Duration::from_micros(200));
                        }
                    })
                    .expect("start a worker thread");
            }
        });
        println!(
            "lock-contend: {} critical sections in total",
            lock.lock().map(|g| *g).unwrap_or(0)
        );
        Ok(())
    }
}

/// Take the lock and keep it while sleeping: the bug.
#[inline(never)]
fn lock_hold_and_sleep(lock: &Mutex<u64>, hold: Duration) {
    let mut count = lock.lock().unwrap_or_else(|e| e.into_inner());
    *count += 1;
    std::thread::sleep(hold);
}

fn main() {
    kdiag_workloads::main::<LockContend>()
}
