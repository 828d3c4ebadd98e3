//! io-stall: the 1-io exercise's idea without a kernel module: the disk
//! stalls in bursts while no process looks busy. The culprit only dirties
//! page cache (cheap, a copy) and then asks for it to be flushed; the
//! expensive part, issuing and completing the block I/O, is done by kernel
//! threads: the writeback workers (kworker/u*:*+flush-MAJ:MIN) and the
//! journal thread (jbd2/DEV). The culprit barely shows in top; its
//! /proc/PID/io write_bytes (charged when pages are dirtied) gives it away.

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

use kdiag_workloads::{Cli, Ctx, Json, Rng, Storage, Workload};

const FILE: &str = "stall.data";

struct IoStall {
    burst: u64,
    period: Duration,
    syncfs: bool,
}

impl Workload for IoStall {
    const NAME: &'static str = "io-stall";
    const USAGE: &'static str = "[--burst SIZE] [--period D] [--mode syncfs|expire]\n\n\
        Every period D (default 2s) rewrites SIZE bytes (default 64M) of a file\n\
        through the page cache, then (mode syncfs, default) calls syncfs(2):\n\
        the kernel's flusher and journal threads write it out. Mode expire never\n\
        syncs: the flusher writes the data when it expires (about 30 s later).";
    const OPTIONS: &'static [&'static str] = &["--burst", "--period", "--mode"];
    const STORAGE: Storage = Storage::Disk;
    const SCRATCH_CAP: u64 = 256 << 20;

    fn from_cli(cli: &Cli) -> Result<Self, String> {
        let mut rng = Rng::new(cli.seed(), "io-stall");
        let (burst, period) = if cli.seeded() {
            (
                rng.range(2, 8) * (16 << 20),
                Duration::from_secs(rng.range(1, 4)),
            )
        } else {
            (64 << 20, Duration::from_secs(2))
        };
        let burst = cli.try_size("--burst")?.unwrap_or(burst);
        let period = match cli.raw("--period") {
            Some(s) => kdiag_workloads::cli::parse_duration(s)
                .ok_or(format!("--period: bad value {s:?}"))?,
            None => period,
        };
        let syncfs = match cli.raw("--mode").unwrap_or("syncfs") {
            "syncfs" => true,
            "expire" => false,
            m => return Err(format!("--mode must be syncfs or expire, not {m:?}")),
        };
        if burst == 0 {
            return Err("--burst must be positive".into());
        }
        Ok(IoStall {
            burst,
            period,
            syncfs,
        })
    }

    fn expect(&self, scratch: &Path) -> Json {
        Json::obj([
            ("class", Json::str("io")),
            (
                "summary",
                Json::str(
                    "bursts of dirty page cache flushed by kernel threads: the disk stalls while the culprit's CPU use stays near zero",
                ),
            ),
            ("file", Json::str(scratch.join(FILE).display().to_string())),
            (
                "mechanism",
                Json::str(if self.syncfs {
                    "dirty-burst+syncfs"
                } else {
                    "dirty-burst+expiry"
                }),
            ),
            ("burst_bytes", Json::Int(self.burst as i64)),
            ("period_s", Json::Num(self.period.as_secs_f64())),
            ("culprit_cpu", Json::str("low")),
            (
                "io_issuers",
                Json::strs(if self.syncfs {
                    vec!["kworker/*flush*", "jbd2/*"]
                } else {
                    vec!["kworker/*flush*"]
                }),
            ),
            (
                "evidence",
                Json::str(
                    "/proc/PID/io write_bytes of the culprit grows by burst_bytes per period",
                ),
            ),
            ("dirty_function", Json::str("stall_dirty_burst")),
        ])
    }

    fn run(&self, ctx: &Ctx) -> Result<(), String> {
        let path = ctx.scratch().file(FILE);
        ctx.scratch().reserve(self.burst)?;
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        eprintln!(
            "io-stall: pid {} dirtying {} MiB every {:?} in {}",
            std::process::id(),
            self.burst >> 20,
            self.period,
            path.display()
        );
        let chunk = vec![0xa5u8; 1 << 20];
        let mut round = 0u8;
        while ctx.running() {
            let started = std::time::Instant::now();
            round = round.wrapping_add(1);
            stall_dirty_burst(&mut file, &chunk, self.burst, round)
                .map_err(|e| format!("write {}: {e}", path.display()))?;
            if self.syncfs {
                // SAFETY: a plain system call on an open fd.
                if unsafe { libc::syncfs(file.as_raw_fd()) } != 0 {
                    return Err(format!("syncfs: {}", std::io::Error::last_os_error()));
                }
            }
            ctx.sleep(self.period.saturating_sub(started.elapsed()));
        }
        Ok(())
    }
}

/// Rewrite the whole burst through the page cache: each page turns dirty
/// again (one byte differs per round), and that is all the culprit pays for.
#[inline(never)]
fn stall_dirty_burst(
    file: &mut std::fs::File,
    chunk: &[u8],
    burst: u64,
    round: u8,
) -> std::io::Result<()> {
    file.seek(SeekFrom::Start(0))?;
    let mut left = burst;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        file.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    file.seek(SeekFrom::Start(0))?;
    file.write_all(&[round])?;
    Ok(())
}

fn main() {
    kdiag_workloads::main::<IoStall>()
}
