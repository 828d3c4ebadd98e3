//! bio: the 4-bio exercise without a kernel module. N threads (default 20)
//! each read their own run of consecutive sectors of a scratch file with
//! synchronous 512-byte O_DIRECT reads, one at a time, then sleep, in
//! rounds. While a read is in flight the thread waits in D state
//! (uninterruptible), so the load average rises while the CPU stays idle.
//!
//! On a fast disk a 512-byte read completes in a fraction of a millisecond,
//! so the threads would spend their time on the CPU, not in D. The original
//! ran against a slow emulated disk; here the truth asks for a read-IOPS
//! limit (`throttle_read_iops`), which `kdiag workload run` applies to the
//! disk for this process through the cgroup I/O controller. `--no-throttle`
//! drops that requirement (and the exercise's point).
//!
//! Seeded: the number of threads and their name, the sectors per thread,
//! the file's name, the reading function's name, the IOPS limit.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::{Cli, Ctx, Json, Storage, Workload};

/// Alignment of the O_DIRECT buffer: enough for any logical block size.
const ALIGN: usize = 4096;
/// The default layout's read-IOPS limit (measured: every reader in D, 0.4 %
/// of a CPU, on this project's VM and its virtio disk).
const DEFAULT_IOPS: u64 = 200;

/// Thread names: a prefix and the thread's number (comm holds 15 bytes).
const PREFIXES: &[&str] = &[
    "bio-read-",
    "kwriterd-",
    "relayd-",
    "blkfetch-",
    "scanner-",
    "prefetch-",
    "indexer-",
    "readahd-",
    "fsck-io-",
    "verifier-",
    "crawler-",
    "syncer-",
];

/// The function issuing one round of reads; index 0 is the default layout's.
pub mod round {
    use super::*;
    crate::named_fns! {
        fn [
            bio_read_sectors, relay_disk_blocks, fetch_block_run, scan_sector_range,
            verify_sector_run, probe_disk_extent, read_index_pages, walk_block_map,
            load_segment_headers, check_block_sums, pull_log_sectors, sample_disk_region,
        ](file: &File, buf: &mut AlignedBuf, first: u64, count: u64, live: &dyn Fn() -> bool)
            -> std::io::Result<()>, |salt|
        {
            // `count` synchronous reads of consecutive blocks, one at a time:
            // the thread sleeps in D until each completes, never spins.
            let len = buf.len as u64;
            for i in 0..count {
                if !live() {
                    break;
                }
                read_at(file, buf, first + i * len)?;
            }
            Ok(())
        }
    }
}

/// One synchronous read of `buf.len` bytes at `offset`. Never inlined: an
/// off-CPU profile walks frame pointers, and glibc's pread sets up none, so
/// the function that calls it drops out of the stack. This helper is the one
/// that drops out; the seeded round function stays on every blocked stack.
#[inline(never)]
fn read_at(file: &File, buf: &mut AlignedBuf, offset: u64) -> std::io::Result<()> {
    // SAFETY: buf is valid for buf.len bytes.
    let n = unsafe { libc::pread(file.as_raw_fd(), buf.ptr.cast(), buf.len, offset as i64) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

pub struct Bio {
    threads: u64,
    sectors: u64,
    sleep: Duration,
    rounds: Option<u64>,
    file: String,
    prefix: &'static str,
    function: usize,
    /// Read IOPS the disk must be limited to; None with --no-throttle.
    throttle: Option<u64>,
}

impl Workload for Bio {
    const NAME: &'static str = "bio";
    const USAGE: &'static str = "[--threads N] [--sectors S] [--sleep D] [--rounds R]\n\n\
        N threads (default 20) each read S consecutive 512-byte sectors (default\n\
        1500) of a scratch file with synchronous O_DIRECT reads, one at a time,\n\
        then sleep D (default 300ms), for R rounds (default: until --duration).";
    const OPTIONS: &'static [&'static str] = &["--threads", "--sectors", "--sleep", "--rounds"];
    const FLAGS: &'static [&'static str] = &["--no-throttle"];
    const STORAGE: Storage = Storage::Disk;

    fn from_cli(cli: &Cli) -> Result<Self, String> {
        let mut rng = cli.seed().rng("bio");
        let (threads, sectors, file, prefix, function, iops) = if cli.seeded() {
            (
                rng.range(12, 24),
                rng.range(1000, 2000),
                crate::io_app::data_file(&mut rng),
                *rng.pick(PREFIXES),
                rng.below(round::NAMES.len() as u64) as usize,
                rng.range(15, 30) * 10,
            )
        } else {
            (
                20,
                1500,
                "bio.data".to_string(),
                PREFIXES[0],
                0,
                DEFAULT_IOPS,
            )
        };
        let threads = cli.try_value("--threads")?.unwrap_or(threads);
        let sectors = cli.try_value("--sectors")?.unwrap_or(sectors);
        if !(1..=256).contains(&threads) || !(1..=1 << 20).contains(&sectors) {
            return Err("--threads must be 1..=256 and --sectors 1..=1048576".into());
        }
        let sleep = match cli.raw("--sleep") {
            Some(s) => crate::cli::parse_duration(s).ok_or(format!("--sleep: bad value {s:?}"))?,
            None => Duration::from_millis(300),
        };
        Ok(Bio {
            threads,
            sectors,
            sleep,
            rounds: cli.try_value("--rounds")?,
            file,
            prefix,
            function,
            throttle: (!cli.flag("--no-throttle")).then_some(iops),
        })
    }

    fn expect(&self) -> Json {
        Json::obj([
            ("class", Json::str("io")),
            (
                "summary",
                Json::str(
                    "many tiny synchronous direct reads: threads wait in D state, load rises, CPU idle",
                ),
            ),
            ("file", Json::str(&self.file)),
            ("threads", Json::Int(self.threads as i64)),
            ("thread_name_prefix", Json::str(self.prefix)),
            ("state", Json::str("D")),
            // The rwbs iosnoop shows for these direct reads on 6.18: R, and S
            // (REQ_SYNC: someone waits for it); older kernels may show R alone.
            ("io_type", Json::str("RS")),
            ("io_bytes", Json::Int(512)),
            ("direct", Json::Bool(true)),
            ("sectors_per_thread", Json::Int(self.sectors as i64)),
            ("pattern", Json::str("sequential")),
            ("cpu_bound", Json::Bool(false)),
            ("read_function", Json::str(round::NAMES[self.function])),
            (
                "throttle_read_iops",
                self.throttle.map_or(Json::Null, |n| Json::Int(n as i64)),
            ),
        ])
    }

    fn run(&self, ctx: &Ctx) -> Result<(), String> {
        let path = ctx.scratch().file(&self.file);
        let bytes = self.threads * self.sectors * 512;
        ctx.scratch().reserve(bytes)?;
        create_file(&path, bytes).map_err(|e| format!("create {}: {e}", path.display()))?;
        let io = logical_block(&path)
            .map_err(|e| format!("O_DIRECT read of {}: {e}", path.display()))?;
        ctx.announce(|| {
            format!(
                "{} threads reading {io}-byte sectors of {} with O_DIRECT",
                self.threads,
                path.display()
            )
        });
        if let Some(iops) = self.throttle
            && !in_kdiag_cgroup()
        {
            eprintln!(
                "bio: warning: its disk is not throttled: started without `kdiag workload run bio`, \
                 which limits it to {} reads/s for this process, the readers spend little time in D \
                 on a fast disk (pass --no-throttle to silence this)",
                if ctx.course {
                    "a few hundred".to_string()
                } else {
                    iops.to_string()
                }
            );
        }
        let stop_at = ctx.deadline;
        let read_round = round::FNS[self.function];
        let rounds = self.rounds.unwrap_or(u64::MAX);
        let handles: Vec<_> = (0..self.threads)
            .map(|t| {
                let path = path.clone();
                let (sectors, sleep) = (self.sectors, self.sleep);
                std::thread::Builder::new()
                    .name(format!("{}{t}", self.prefix))
                    .spawn(move || -> std::io::Result<()> {
                        let file = OpenOptions::new()
                            .read(true)
                            .custom_flags(libc::O_DIRECT)
                            .open(&path)?;
                        let mut buf = AlignedBuf::new(io);
                        let live = || stop_at.is_none_or(|d| Instant::now() < d);
                        for _ in 0..rounds {
                            let first = t * sectors * 512 / io as u64 * io as u64;
                            read_round(&file, &mut buf, first, sectors * 512 / io as u64, &live)?;
                            if !live() {
                                break;
                            }
                            std::thread::sleep(sleep);
                        }
                        Ok(())
                    })
                    .expect("start a reader thread")
            })
            .collect();
        let mut result = Ok(());
        for h in handles {
            if let Ok(Err(e)) = h.join() {
                result = Err(format!("read {}: {e}", path.display()));
            }
        }
        result
    }
}

/// Real data (holes would be answered without touching the disk), synced
/// and dropped from the page cache.
fn create_file(path: &Path, bytes: u64) -> std::io::Result<()> {
    let mut file = File::create(path)?;
    let chunk = vec![0x5au8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        file.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    file.sync_all()?;
    // SAFETY: advisory call on an open fd.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    Ok(())
}

/// The smallest O_DIRECT read size the file system accepts: 512, else 4096.
fn logical_block(path: &Path) -> std::io::Result<usize> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)?;
    let buf = AlignedBuf::new(ALIGN);
    let mut last = std::io::Error::from_raw_os_error(libc::EINVAL);
    for size in [512, 4096] {
        // SAFETY: buf is valid for ALIGN >= size bytes.
        if unsafe { libc::pread(file.as_raw_fd(), buf.ptr.cast(), size, 0) } >= 0 {
            return Ok(size);
        }
        last = std::io::Error::last_os_error();
    }
    Err(last)
}

/// True when this process sits in a cgroup kdiag made (kdiag-PID-N), in
/// any hierarchy: the one whose I/O limit `kdiag workload run` set.
fn in_kdiag_cgroup() -> bool {
    std::fs::read_to_string("/proc/self/cgroup").is_ok_and(|text| {
        text.lines()
            .filter_map(|l| l.rsplit(':').next())
            .any(|path| {
                path.rsplit('/')
                    .next()
                    .is_some_and(|n| n.starts_with("kdiag-"))
            })
    })
}

/// A page-aligned buffer, as O_DIRECT requires.
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

impl AlignedBuf {
    fn new(len: usize) -> AlignedBuf {
        let layout = std::alloc::Layout::from_size_align(ALIGN, ALIGN).unwrap();
        // SAFETY: non-zero size layout.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory");
        AlignedBuf { ptr, len }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(ALIGN, ALIGN).unwrap();
        // SAFETY: allocated in new with the same layout.
        unsafe { std::alloc::dealloc(self.ptr, layout) };
    }
}

// The buffer belongs to one thread at a time.
unsafe impl Send for AlignedBuf {}
