//! scheduling: the 2-scheduling exercise. Runs the same small function N
//! times in parallel, MODE 0 with threads, MODE 1 with fork()ed processes,
//! waits for all of them and prints how long it took. Fork mode pays for a
//! page-table copy per child, copy-on-write faults on shared data and an mm
//! teardown at each exit; threads share one mm.
//!
//! Seeded: the number of tasks, the name of the function each task runs.
//! Not seeded (conceptual): threads are the faster mode.

use std::time::Instant;

use crate::{Cli, Ctx, Json, Storage, Workload};

/// Heap the parent has touched before starting the workers: every fork()
/// copies its page tables and every child exit tears them down again.
const DATASET_BYTES: usize = 16 << 20;
/// Memory every worker writes to: already faulted in the parent, so threads
/// never fault on it while each forked child takes copy-on-write faults.
const SHARED_PAGES: usize = 128;
static mut SHARED: [u8; SHARED_PAGES * 4096] = [0; SHARED_PAGES * 4096];

/// The small function; index 0 is the default layout's.
pub mod task {
    use super::*;
    crate::named_fns! {
        fn [
            scheduling_worker, handle_request, process_job, serve_client, run_task_unit,
            compute_shard, render_tile, parse_message, score_candidate, resolve_query,
            encode_frame, validate_order, index_document, hash_block, route_packet,
            simulate_step,
        ](i: u64) -> u64, |salt| {
            // Some arithmetic (about 0.1 ms, enough to show in a profile)
            // and one write per shared page.
            let mut acc = i ^ salt;
            for k in 0..100_000u64 {
                // The rotate keeps the compiler from folding the loop.
                acc = (acc ^ k).wrapping_mul(6364136223846793005).rotate_left(17);
            }
            touch_shared(acc as u8);
            std::hint::black_box(acc)
        }
    }
}

pub struct Scheduling {
    mode: u8,
    n: u64,
    function: usize,
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
        let mut rng = cli.seed().rng("scheduling");
        let (default_n, function) = if cli.seeded() {
            (
                rng.range(200, 400),
                rng.below(task::NAMES.len() as u64) as usize,
            )
        } else {
            (300, 0)
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
        Ok(Scheduling { mode, n, function })
    }

    fn expect(&self) -> Json {
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
            ("worker_function", Json::str(task::NAMES[self.function])),
        ])
    }

    fn run(&self, ctx: &Ctx) -> Result<(), String> {
        touch_shared(0);
        loop {
            self.batch(ctx)?;
            if !ctx.again() {
                return Ok(());
            }
            // A job runner between batches: the learner sees bursts.
            ctx.sleep(std::time::Duration::from_millis(100));
        }
    }
}

impl Scheduling {
    /// Run the N tasks once and wait for all of them.
    fn batch(&self, ctx: &Ctx) -> Result<(), String> {
        let dataset = std::hint::black_box(vec![1u8; DATASET_BYTES]);
        let worker = task::FNS[self.function];
        let start = Instant::now();
        if self.mode == 0 {
            let handles: Vec<_> = (0..self.n)
                .map(|i| std::thread::spawn(move || worker(i)))
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
                        worker(i);
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
        let secs = start.elapsed().as_secs_f64();
        let what = if self.mode == 0 {
            "threads"
        } else {
            "processes"
        };
        ctx.report(
            || format!("{} {what} in {secs:.6} s", self.n),
            || format!("all {what} done in {secs:.6} s"),
        );
        Ok(())
    }
}

fn touch_shared(v: u8) {
    let base = &raw mut SHARED as *mut u8;
    for page in 0..SHARED_PAGES {
        // SAFETY: in bounds; racing byte writes between threads are harmless
        // here (volatile, the value is never read).
        unsafe { base.add(page * 4096).write_volatile(v) };
    }
}
