//! lock-contend: the lock-bound case. N threads serialise on one mutex that
//! its holder keeps while sleeping, so at any moment one thread sleeps in
//! nanosleep holding the lock and the others sleep in futex waiting for it:
//! little CPU, little progress.
//!
//! Seeded: the number of threads and their name, how long the lock is
//! held, the name of the function that holds it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::{Cli, Ctx, Json, Storage, Workload};

/// Thread names: a prefix and the thread's number (comm holds 15 bytes).
const PREFIXES: &[&str] = &[
    "lock-worker-",
    "db-writer-",
    "cache-upd-",
    "acct-sync-",
    "ledger-",
    "pool-",
    "session-",
    "txn-",
    "stats-",
    "registry-",
    "queue-",
    "config-",
];

/// The function that takes the lock and sleeps with it (the bug); index 0
/// is the default layout's.
pub mod holder {
    use super::*;
    crate::named_fns! {
        fn [
            lock_hold_and_sleep, update_shared_table, refresh_global_cache, commit_under_lock,
            rebalance_accounts, flush_stats_locked, rotate_session_keys, reload_config_locked,
            append_to_ledger, compact_registry, renew_leases, sync_counters,
        ](lock: &Mutex<u64>, hold: Duration) -> u64, |salt| {
            let mut count = lock.lock().unwrap_or_else(|e| e.into_inner());
            *count += 1;
            std::thread::sleep(hold);
            *count
        }
    }
}

pub struct LockContend {
    threads: u64,
    hold: Duration,
    prefix: &'static str,
    function: usize,
}

impl Workload for LockContend {
    const NAME: &'static str = "lock-contend";
    const STORAGE: Storage = Storage::None;
    const USAGE: &'static str = "[--threads N] [--hold D]\n\n\
        N threads (default 4) take one std::sync::Mutex in turn and hold it\n\
        while sleeping D (default 20ms).";
    const OPTIONS: &'static [&'static str] = &["--threads", "--hold"];

    fn from_cli(cli: &Cli) -> Result<Self, String> {
        let mut rng = cli.seed().rng("lock-contend");
        let (threads, hold_ms, prefix, function) = if cli.seeded() {
            (
                rng.range(3, 8),
                rng.range(10, 40),
                *rng.pick(PREFIXES),
                rng.below(holder::NAMES.len() as u64) as usize,
            )
        } else {
            (4, 20, PREFIXES[0], 0)
        };
        let threads = cli.try_value("--threads")?.unwrap_or(threads);
        if !(2..=64).contains(&threads) {
            return Err("--threads must be between 2 and 64".into());
        }
        let hold = match cli.raw("--hold") {
            Some(s) => crate::cli::parse_duration(s).ok_or(format!("--hold: bad value {s:?}"))?,
            None => Duration::from_millis(hold_ms),
        };
        Ok(LockContend {
            threads,
            hold,
            prefix,
            function,
        })
    }

    fn expect(&self) -> Json {
        Json::obj([
            ("class", Json::str("lock")),
            (
                "summary",
                Json::str(
                    "threads serialised on one mutex held while sleeping: they wait in futex, CPU idle",
                ),
            ),
            ("threads", Json::Int(self.threads as i64)),
            ("thread_name_prefix", Json::str(self.prefix)),
            ("hold_ms", Json::Num(self.hold.as_secs_f64() * 1000.0)),
            ("wait_syscall", Json::str("futex")),
            ("holder_syscall", Json::str("clock_nanosleep")),
            ("state", Json::str("S")),
            ("lock_function", Json::str(holder::NAMES[self.function])),
            ("cpu_bound", Json::Bool(false)),
        ])
    }

    fn run(&self, ctx: &Ctx) -> Result<(), String> {
        ctx.announce(|| {
            format!(
                "{} threads sharing one mutex held {:?} at a time",
                self.threads, self.hold
            )
        });
        let lock = Mutex::new(0u64);
        let hold_and_sleep = holder::FNS[self.function];
        let deadline = ctx.deadline;
        std::thread::scope(|s| {
            for t in 0..self.threads {
                let (lock, hold) = (&lock, self.hold);
                std::thread::Builder::new()
                    .name(format!("{}{t}", self.prefix))
                    .spawn_scoped(s, move || {
                        while deadline.is_none_or(|d| Instant::now() < d) {
                            hold_and_sleep(lock, hold);
                            // A moment outside the lock, so the woken waiter
                            // can take it instead of this thread again.
                            std::thread::sleep(Duration::from_micros(200));
                        }
                    })
                    .expect("start a worker thread");
            }
        });
        let sections = lock.lock().map(|g| *g).unwrap_or(0);
        println!("lock-contend: {sections} critical sections in total");
        Ok(())
    }
}
