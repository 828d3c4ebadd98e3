//! cpu-burn: known hot functions for the profilers. User mode splits its
//! time between two of four distinctively named functions (75/25 by
//! default); kernel mode spins on a cheap system call, so the time lands in
//! the kernel. Every function that matters is `#[inline(never)]` and frame
//! pointers are on (.cargo/config.toml), so stacks name them.

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Instant;

use kdiag_workloads::{Cli, Ctx, Json, Rng, Storage, Workload};

const HOT: [&str; 4] = [
    "burn_hot_alpha",
    "burn_hot_beta",
    "burn_hot_gamma",
    "burn_hot_delta",
];
const SYSCALLS: [&str; 2] = ["getppid", "write"];

struct CpuBurn {
    kernel: bool,
    major: usize,
    minor: usize,
    /// Percent of the user-mode work done by `major`.
    share: u64,
    syscall: usize,
    threads: u64,
    seed: u64,
}

impl Workload for CpuBurn {
    const NAME: &'static str = "cpu-burn";
    const STORAGE: Storage = Storage::None;
    const USAGE: &'static str = "[--mode user|kernel] [--threads N]\n\n\
        user (default): burns CPU in two named functions with a known split\n\
        (seed 0: burn_hot_alpha 75%, burn_hot_beta 25%).\n\
        kernel: a tight loop of a cheap system call (seed 0: getppid; others\n\
        may write(2) one byte to /dev/null).";
    const OPTIONS: &'static [&'static str] = &["--mode", "--threads"];

    fn from_cli(cli: &Cli) -> Result<Self, String> {
        let kernel = match cli.raw("--mode").unwrap_or("user") {
            "user" => false,
            "kernel" => true,
            m => return Err(format!("--mode must be user or kernel, not {m:?}")),
        };
        let mut rng = Rng::new(cli.seed(), "cpu-burn");
        let (major, minor, share, syscall) = if cli.seeded() {
            let major = rng.range(0, 3) as usize;
            let minor = (major + rng.range(1, 3) as usize) % 4;
            (
                major,
                minor,
                rng.range(12, 18) * 5,
                rng.range(0, 1) as usize,
            )
        } else {
            (0, 1, 75, 0)
        };
        let threads = cli.try_value("--threads")?.unwrap_or(1);
        if !(1..=64).contains(&threads) {
            return Err("--threads must be between 1 and 64".into());
        }
        Ok(CpuBurn {
            kernel,
            major,
            minor,
            share,
            syscall,
            threads,
            seed: cli.seed(),
        })
    }

    fn expect(&self, _scratch: &Path) -> Json {
        let summary = if self.kernel {
            "a tight system-call loop: CPU time is mostly system time"
        } else {
            "CPU-bound in user space, split between two named hot functions"
        };
        let mut fields = vec![
            ("class", Json::str("cpu")),
            ("summary", Json::str(summary)),
            (
                "mode",
                Json::str(if self.kernel { "kernel" } else { "user" }),
            ),
            ("threads", Json::Int(self.threads as i64)),
        ];
        if self.kernel {
            fields.push(("cpu_time", Json::str("system")));
            fields.push(("syscall", Json::str(SYSCALLS[self.syscall])));
            fields.push(("loop_function", Json::str("burn_kernel_syscalls")));
        } else {
            let hot = |i: usize, share: u64| {
                Json::obj([
                    ("name", Json::str(HOT[i])),
                    ("share", Json::Num(share as f64 / 100.0)),
                ])
            };
            fields.push(("cpu_time", Json::str("user")));
            fields.push((
                "hot_functions",
                Json::Arr(vec![
                    hot(self.major, self.share),
                    hot(self.minor, 100 - self.share),
                ]),
            ));
            fields.push(("hottest", Json::str(HOT[self.major])));
        }
        Json::obj(fields)
    }

    fn run(&self, ctx: &Ctx) -> Result<(), String> {
        eprintln!(
            "cpu-burn: pid {} burning in {} mode on {} thread(s)",
            std::process::id(),
            if self.kernel { "kernel" } else { "user" },
            self.threads
        );
        let deadline = ctx.deadline;
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..self.threads)
                .map(|t| s.spawn(move || self.worker(t, deadline)))
                .collect();
            workers
                .into_iter()
                .try_for_each(|w| w.join().unwrap_or(Err("a worker panicked".into())))
        })
    }
}

impl CpuBurn {
    fn worker(&self, t: u64, deadline: Option<Instant>) -> Result<(), String> {
        let live = || deadline.is_none_or(|d| Instant::now() < d);
        if self.kernel {
            let null = OpenOptions::new()
                .write(true)
                .open("/dev/null")
                .map_err(|e| format!("/dev/null: {e}"))?;
            while live() {
                burn_kernel_syscalls(self.syscall, null.as_raw_fd());
            }
            return Ok(());
        }
        // Each call does the same work, so the call split is the time split.
        let mut rng = Rng::new(self.seed ^ t, "cpu-burn-calls");
        let mut acc = 0u64;
        while live() {
            for _ in 0..64 {
                acc = if rng.range(1, 100) <= self.share {
                    call_hot(self.major, acc)
                } else {
                    call_hot(self.minor, acc)
                };
            }
        }
        std::hint::black_box(acc);
        Ok(())
    }
}

fn call_hot(which: usize, acc: u64) -> u64 {
    match which {
        0 => burn_hot_alpha(acc),
        1 => burn_hot_beta(acc),
        2 => burn_hot_gamma(acc),
        _ => burn_hot_delta(acc),
    }
}

/// The shared inner loop; inlined into each hot function so the samples land
/// in the named function itself.
#[inline(always)]
#[allow(clippy::manual_rotate)]
fn spin(mut x: u64, k: u64) -> u64 {
    // A while loop, not a range: debug builds would spend the samples in
    // out-of-line iterator code instead of the named function.
    let mut i = 0u64;
    while i < 20_000 {
        let y = (x ^ i).wrapping_mul(k);
        x = (y << 17) | (y >> 47); // rotate, spelled out to stay inline in debug builds
        i += 1;
    }
    x
}

#[inline(never)]
fn burn_hot_alpha(x: u64) -> u64 {
    spin(x, 0x9e37_79b9_7f4a_7c15)
}

#[inline(never)]
fn burn_hot_beta(x: u64) -> u64 {
    spin(x, 0xbf58_476d_1ce4_e5b9)
}

#[inline(never)]
fn burn_hot_gamma(x: u64) -> u64 {
    spin(x, 0x94d0_49bb_1331_11eb)
}

#[inline(never)]
fn burn_hot_delta(x: u64) -> u64 {
    spin(x, 0xd6e8_feb8_6659_fd93)
}

/// A batch of cheap system calls: nearly all the time is entry, exit and
/// the call itself, in the kernel.
#[inline(never)]
fn burn_kernel_syscalls(which: usize, null_fd: i32) {
    let byte = 0u8;
    for _ in 0..1000 {
        // SAFETY: getppid has no preconditions; write of one valid byte.
        unsafe {
            if which == 0 {
                libc::getppid();
            } else {
                libc::write(null_fd, (&raw const byte).cast(), 1);
            }
        }
    }
}

fn main() {
    kdiag_workloads::main::<CpuBurn>()
}
