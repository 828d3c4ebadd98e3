//! cpu-burn: known hot functions for the profilers. User mode splits its
//! time between two of sixteen distinctively named functions (75/25 by
//! default); kernel mode loops on a system call that works in the kernel,
//! so the time lands there. Every function that matters is `#[inline(never)]` and frame
//! pointers are on (.cargo/config.toml), so stacks name them.
//!
//! Seeded: the two hot functions and their split; in kernel mode the system
//! call and the loop function's name.

use std::time::Instant;

use crate::{Cli, Ctx, Json, Rng, Storage, Workload};

/// The hot functions; the default layout uses the first two.
pub mod hot {
    crate::named_fns! {
        fn [
            burn_hot_alpha, burn_hot_beta, burn_hot_gamma, burn_hot_delta,
            crunch_matrix, hash_passwords, fold_checksums, mix_audio_frames,
            solve_sudoku_grid, trace_rays, sort_scores, compress_tiles,
            evaluate_positions, blur_pixels, fit_regression, mine_nonces,
        ](x: u64) -> u64, |salt| {
            spin(x, salt)
        }
    }

    /// The shared inner loop, inlined into each hot function so the samples
    /// land in the named function itself.
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
}

/// Kernel mode's system calls. Each call does microseconds of work in the
/// kernel with interrupts on. A cheap call (getppid) would not do: its
/// kernel time is mostly the entry and exit path, run with interrupts off,
/// and a tick that falls there is taken just after the return to user mode
/// and charged as user time. On a host that clears CPU buffers on every
/// return to user (AMD's TSA mitigation) a getppid loop was charged 60% user.
const SYSCALLS: [&str; 4] = ["getrandom", "pread64", "pwrite64", "mincore"];

/// What the calls work on: 64 KiB of a file in memory (pread64, pwrite64),
/// a buffer for it and getrandom, and 4 MiB of mapped memory (mincore).
pub struct Target {
    file: std::fs::File,
    buf: Vec<u8>,
    map: *mut libc::c_void,
    residency: Vec<u8>,
}

const FILE_BYTES: usize = 64 << 10;
const RANDOM_BYTES: usize = 4 << 10;
const MAP_BYTES: usize = 4 << 20;
const PAGE: usize = 4096;

impl Target {
    fn open() -> Result<Target, String> {
        let err = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
        // SAFETY: a NUL-terminated name and no flags.
        let fd = unsafe { libc::memfd_create(c"cpu-burn".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(err("memfd_create"));
        }
        // SAFETY: fd was just created and is owned by nobody else.
        let mut file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        let buf = vec![0x5a; FILE_BYTES];
        std::io::Write::write_all(&mut file, &buf).map_err(|e| format!("memfd: {e}"))?;
        // SAFETY: a fresh private anonymous mapping, populated so that
        // mincore has pages to report on.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MAP_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(err("mmap"));
        }
        let residency = vec![0; MAP_BYTES / PAGE];
        Ok(Target {
            file,
            buf,
            map,
            residency,
        })
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        // SAFETY: the mapping made in open, used by nothing else now.
        unsafe { libc::munmap(self.map, MAP_BYTES) };
    }
}

/// Kernel mode's loop; index 0 is the default layout's.
pub mod syscalls {
    use super::{FILE_BYTES, MAP_BYTES, RANDOM_BYTES, Target};

    crate::named_fns! {
        fn [
            burn_kernel_syscalls, poll_parent_forever, spin_on_syscalls, hammer_kernel,
            busy_check_owner, ping_device_loop, query_ids_forever, heartbeat_loop,
        ](which: usize, t: &mut Target) -> u64, |salt| {
            let fd = std::os::fd::AsRawFd::as_raw_fd(&t.file);
            let mut done = 0u64;
            for _ in 0..100 {
                // SAFETY: every buffer is as long as the length passed.
                let n = unsafe {
                    match which {
                        0 => libc::getrandom(t.buf.as_mut_ptr().cast(), RANDOM_BYTES, 0),
                        1 => libc::pread(fd, t.buf.as_mut_ptr().cast(), FILE_BYTES, 0),
                        2 => libc::pwrite(fd, t.buf.as_ptr().cast(), FILE_BYTES, 0),
                        _ => libc::mincore(t.map, MAP_BYTES, t.residency.as_mut_ptr()) as isize,
                    }
                };
                done = done.wrapping_add(n as u64 ^ salt);
            }
            done
        }
    }
}

pub struct CpuBurn {
    kernel: bool,
    major: usize,
    minor: usize,
    /// Percent of the user-mode work done by `major`.
    share: u64,
    syscall: usize,
    looper: usize,
    threads: u64,
    seed: u64,
}

impl Workload for CpuBurn {
    const NAME: &'static str = "cpu-burn";
    const STORAGE: Storage = Storage::None;
    const USAGE: &'static str = "[--mode user|kernel] [--threads N]\n\n\
        user (default): burns CPU in two named functions with a known split\n\
        (seed 0: burn_hot_alpha 75%, burn_hot_beta 25%).\n\
        kernel: a tight loop of a system call that works in the kernel (seed 0:\n\
        getrandom of 4 KiB; others may use pread64 or pwrite64 of 64 KiB on a\n\
        memfd, or mincore of 4 MiB).";
    const OPTIONS: &'static [&'static str] = &["--mode", "--threads"];

    fn from_cli(cli: &Cli) -> Result<Self, String> {
        let kernel = match cli.raw("--mode").unwrap_or("user") {
            "user" => false,
            "kernel" => true,
            m => return Err(format!("--mode must be user or kernel, not {m:?}")),
        };
        let mut rng = cli.seed().rng("cpu-burn");
        let (major, minor, share, syscall, looper) = if cli.seeded() {
            let n = hot::NAMES.len() as u64;
            let major = rng.below(n);
            let minor = (major + rng.range(1, n - 1)) % n;
            (
                major as usize,
                minor as usize,
                rng.range(12, 18) * 5,
                rng.below(SYSCALLS.len() as u64) as usize,
                rng.below(syscalls::NAMES.len() as u64) as usize,
            )
        } else {
            (0, 1, 75, 0, 0)
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
            looper,
            threads,
            seed: cli.seed().hash(),
        })
    }

    fn expect(&self) -> Json {
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
            fields.push(("loop_function", Json::str(syscalls::NAMES[self.looper])));
        } else {
            let hot = |i: usize, share: u64| {
                Json::obj([
                    ("name", Json::str(hot::NAMES[i])),
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
            fields.push(("hottest", Json::str(hot::NAMES[self.major])));
        }
        Json::obj(fields)
    }

    fn run(&self, ctx: &Ctx) -> Result<(), String> {
        ctx.announce(|| {
            format!(
                "burning in {} mode on {} thread(s)",
                if self.kernel { "kernel" } else { "user" },
                self.threads
            )
        });
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
    /// Never inlined: profiles show the worker loop under every hot
    /// function (tests/profile.rs asserts the whole stack comes through),
    /// whatever the compiler decides for its caller.
    #[inline(never)]
    fn worker(&self, t: u64, deadline: Option<Instant>) -> Result<(), String> {
        let live = || deadline.is_none_or(|d| Instant::now() < d);
        if self.kernel {
            let mut target = Target::open()?;
            let looper = syscalls::FNS[self.looper];
            while live() {
                std::hint::black_box(looper(self.syscall, &mut target));
            }
            return Ok(());
        }
        // Each call does the same work, so the call split is the time split.
        let mut rng = Rng::new(self.seed ^ t, "cpu-burn-calls");
        let (major, minor) = (hot::FNS[self.major], hot::FNS[self.minor]);
        let mut acc = 0u64;
        while live() {
            for _ in 0..64 {
                acc = if rng.range(1, 100) <= self.share {
                    major(acc)
                } else {
                    minor(acc)
                };
            }
        }
        std::hint::black_box(acc);
        Ok(())
    }
}
