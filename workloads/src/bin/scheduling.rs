//! scheduling: the 2-scheduling exercise. Runs the same small function N
//! times in parallel, MODE 0 with threads, MODE 1 with fork()ed processes,
//! waits for all of them and prints how long it took. Fork mode pays for a
//! page-table copy per child, copy-on-write faults on shared data and an mm
//! teardown at each exit; threads share one mm.

use std::path::Path;
use std::time::Instant;

use kdiag_workloads::{Cli, Ctx, Json, Rng, Storage, Workload};

/// Memory every worker writes to: already faulted in the parent, so threads
/// never fault on it while each forked child takes copy-on-write faults.
/// Heap the parent has touched before starting the workers.
const DATASET_BYTES: usize = 16 << 20;
const SHARED_PAGES: usize = 128;
static mut SHARED: [u8; SHARED_PAGES * 4096] = [0; SHARED_PAGES * 4096];

struct Scheduling {
    mode: u8,
    n: u64,
}

impl Workload for Scheduling {
    const NAME: &'static str = "scheduling";
    const STORAGE: Storage = Storage::None;
    const USAGE: &'static str = "MODE [N]\n\n\
        Runs a small function N times in parallel (default 300):\n\
        MODE 0 with threads, MODE 1 with fork()ed processes.";
    const DURATION: Option<std::time::Duration> = None;

    fn from_cli(cli: &Cli) -> Result<Self, String> {
        let mode = match cli.positional(0) {
            Some("0") => 0,
            Some("1") => 1,
            Some(m) => return Err(format!("MODE must be 0 (threads) or 1 (fork), not {m:?}")),
            None => return Err("missing MODE: 0 (threads) or 1 (fork)".into()),
        };
        let default_n = if cli.seeded() {
            Rng::new(cli.seed(), "scheduling").range(200, 400)
        } else {
            300
        };
        let n = match cli.positional(1) {
            Some(s) => s
                .parse()
                .map_err(|_| format!("N must be a number, not {s:?}"))?,
            None => default_n,
        };
        if !(1..=5000).contains(&n) {
            return Err("N must be between 1 and 5000".into());
        }
        Ok(Scheduling { mode, n })
    }

    fn expect(&self, _scratch: &Path) -> Json {
        Json::obj([
            ("class", Json::str("scheduler")),
            (
                "summary",
                Json::str(
                    "fork() per task costs far more page faults and system time than threads",
                ),
            ),
            ("mode", Json::Int(self.mode as i64)),
            (
                "mechanism",
                Json::str(if self.mode == 0 { "threads" } else { "fork" }),
            ),
            ("tasks", Json::Int(self.n as i64)),
            ("faster_mode", Json::Int(0)),
            (
                "evidence",
                Json::strs(["minor-faults", "system-time", "wall-time"]),
            ),
            ("worker_function", Json::str("scheduling_worker")),
        ])
    }

    fn run(&self, _ctx: &Ctx) -> Result<(), String> {
        touch_shared(0);
        // A working set like a real server's: every fork() copies its page
        // tables and every child exit tears them down again.
        let dataset = vec![1u8; DATASET_BYTES];
        let dataset = std::hint::black_box(dataset);
        let start = Instant::now();
        if self.mode == 0 {
            let handles: Vec<_> = (0..self.n)
                .map(|i| std::thread::spawn(move || scheduling_worker(i)))
                .collect();
            for h in handles {
                h.join()
                    .map_err(|_| "a worker thread panicked".to_string())?;
            }
        } else {
            let mut pids = Vec::with_capacity(self.n as usize);
            for i in 0..self.n {
                // SAFETY: the child only computes, writes to SHARED and _exits:
                // no allocation or locks after fork.
                match unsafe { libc::fork() } {
                    -1 => return Err(format!("fork: {}", std::io::Error::last_os_error())),
                    0 => {
                        scheduling_worker(i);
                        unsafe { libc::_exit(0) }
                    }
                    pid => pids.push(pid),
                }
            }
            drop(dataset);
            for pid in pids {
                let mut status = 0;
                // SAFETY: waiting for our own child.
                while unsafe { libc::waitpid(pid, &mut status, 0) } == -1 {}
            }
        }
        let elapsed = start.elapsed();
        println!(
            "scheduling: {} {} in {:.6} s",
            self.n,
            if self.mode == 0 {
                "threads"
            } else {
                "processes"
            },
            elapsed.as_secs_f64()
        );
        Ok(())
    }
}

/// The small function: a little arithmetic and one write per shared page.
#[inline(never)]
fn scheduling_worker(i: u64) -> u64 {
    let mut acc = i;
    for k in 0..2_000u64 {
        acc = acc.wrapping_mul(6364136223846793005).wrapping_add(k);
    }
    touch_shared(acc as u8);
    std::hint::black_box(acc)
}

fn touch_shared(v: u8) {
    let base = &raw mut SHARED as *mut u8;
    for page in 0..SHARED_PAGES {
        // SAFETY: in bounds; racing byte writes between threads are harmless
        // here (volatile, the value is never read).
        unsafe { base.add(page * 4096).write_volatile(v) };
    }
}

fn main() {
    kdiag_workloads::main::<Scheduling>()
}
