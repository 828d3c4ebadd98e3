//! io-stall: the 1-io exercise's idea without a kernel module: the disk
//! stalls in bursts while no process looks busy. The culprit only dirties
//! page cache (cheap, a copy) and then asks for it to be flushed; the
//! expensive part, issuing and completing the block I/O, is done by kernel
//! threads: the writeback workers (kworker/u*:*+flush-MAJ:MIN) and the
//! journal thread (jbd2/DEV). The culprit barely shows in top; its
//! /proc/PID/io write_bytes (charged when pages are dirtied) gives it away.
//!
//! Seeded: the file's name, the burst's size, the period, the name of the
//! function that dirties.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::time::Duration;

use crate::{Cli, Ctx, Json, Storage, Workload};

/// The function dirtying each burst; index 0 is the default layout's.
pub mod burst {
    use super::*;
    crate::named_fns! {
        fn [
            stall_dirty_burst, refresh_page_cache, rebuild_spool, update_blob_store,
            rewrite_cache_pages, fill_staging_area, overwrite_snapshot, churn_temp_pages,
            recompute_tiles, regenerate_thumbnails, repack_objects, rotate_buffers,
        ](file: &mut File, chunk: &[u8], burst: u64, round: u8) -> std::io::Result<()>, |salt| {
            // Rewrite the whole burst through the page cache: each page turns
            // dirty again (one byte differs per round), and that is all the
            // culprit pays for. Each page is written once per burst, in
            // chunks no folio spans: a sync elsewhere that cleaned a folio
            // between two writes into it would charge the whole folio to
            // write_bytes again (a round byte written last put 129 MiB in
            // a 128 MiB step beside `stress-ng --io`).
            file.seek(SeekFrom::Start(0))?;
            let mut left = burst;
            let mut first = true;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                if std::mem::take(&mut first) {
                    let mut head = chunk[..n].to_vec();
                    head[0] = round;
                    file.write_all(&head)?;
                } else {
                    file.write_all(&chunk[..n])?;
                }
                left -= n as u64;
            }
            Ok(())
        }
    }
}

pub struct IoStall {
    file: String,
    burst: u64,
    period: Duration,
    syncfs: bool,
    function: usize,
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
        let mut rng = cli.seed().rng("io-stall");
        let (file, burst, period, function) = if cli.seeded() {
            (
                crate::io_app::data_file(&mut rng),
                rng.range(4, 16) << 23, // 32 to 128 MiB in 8 MiB steps
                Duration::from_millis(rng.range(4, 16) * 250), // 1 to 4 s
                rng.below(burst::NAMES.len() as u64) as usize,
            )
        } else {
            (
                "stall.data".to_string(),
                64 << 20,
                Duration::from_secs(2),
                0,
            )
        };
        let burst = cli.try_size("--burst")?.unwrap_or(burst);
        let period = match cli.raw("--period") {
            Some(s) => crate::cli::parse_duration(s).ok_or(format!("--period: bad value {s:?}"))?,
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
            file,
            burst,
            period,
            syncfs,
            function,
        })
    }

    fn expect(&self) -> Json {
        Json::obj([
            ("class", Json::str("io")),
            (
                "summary",
                Json::str(
                    "bursts of dirty page cache flushed by kernel threads: the disk stalls while the culprit's CPU use stays near zero",
                ),
            ),
            ("file", Json::str(&self.file)),
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
            ("dirty_function", Json::str(burst::NAMES[self.function])),
        ])
    }

    fn run(&self, ctx: &Ctx) -> Result<(), String> {
        let path = ctx.scratch().file(&self.file);
        ctx.scratch().reserve(self.burst)?;
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        ctx.announce(|| {
            format!(
                "dirtying {} MiB every {:?} in {}",
                self.burst >> 20,
                self.period,
                path.display()
            )
        });
        // 2 MiB: the largest folio of the page cache (a PMD), aligned.
        let chunk = vec![0xa5u8; 2 << 20];
        let dirty = burst::FNS[self.function];
        let mut round = 0u8;
        while ctx.running() {
            let started = std::time::Instant::now();
            round = round.wrapping_add(1);
            dirty(&mut file, &chunk, self.burst, round)
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
