//! bio: the 4-bio exercise without a kernel module. N threads (default 20)
//! each read their own run of consecutive sectors of a scratch file with
//! synchronous 512-byte O_DIRECT reads, one at a time, then sleep, in
//! rounds. While a read is in flight the thread waits in D state
//! (uninterruptible), so the load average rises while the CPU stays idle.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

use kdiag_workloads::{Cli, Ctx, Json, Rng, Storage, Workload};

const FILE: &str = "bio.data";
/// Alignment of the O_DIRECT buffer: enough for any logical block size.
const ALIGN: usize = 4096;

struct Bio {
    threads: u64,
    sectors: u64,
    sleep: Duration,
    rounds: Option<u64>,
}

impl Workload for Bio {
    const NAME: &'static str = "bio";
    const USAGE: &'static str = "[--threads N] [--sectors S] [--sleep D] [--rounds R]\n\n\
        N threads (default 20) each read S consecutive 512-byte sectors (default\n\
        1500) of a scratch file with synchronous O_DIRECT reads, one at a time,\n\
        then sleep D (default 300ms), for R rounds (default: until --duration).";
    const OPTIONS: &'static [&'static str] = &["--threads", "--sectors", "--sleep", "--rounds"];
    const STORAGE: Storage = Storage::Disk;

    fn from_cli(cli: &Cli) -> Result<Self, String> {
        let mut rng = Rng::new(cli.seed(), "bio");
        let (threads, sectors) = if cli.seeded() {
            (rng.range(12, 24), rng.range(1000, 2000))
        } else {
            (20, 1500)
        };
        let threads = cli.try_value("--threads")?.unwrap_or(threads);
        let sectors = cli.try_value("--sectors")?.unwrap_or(sectors);
        if !(1..=256).contains(&threads) || !(1..=1 << 20).contains(&sectors) {
            return Err("--threads must be 1..=256 and --sectors 1..=1048576".into());
        }
        let sleep = match cli.raw("--sleep") {
            Some(s) => kdiag_workloads::cli::parse_duration(s)
                .ok_or(format!("--sleep: bad value {s:?}"))?,
            None => Duration::from_millis(300),
        };
        Ok(Bio {
            threads,
            sectors,
            sleep,
            rounds: cli.try_value("--rounds")?,
        })
    }

    fn expect(&self, scratch: &Path) -> Json {
        Json::obj([
            ("class", Json::str("io")),
            (
                "summary",
                Json::str(
                    "many tiny synchronous direct reads: threads wait in D state, load rises, CPU idle",
                ),
            ),
            ("file", Json::str(scratch.join(FILE).display().to_string())),
            ("threads", Json::Int(self.threads as i64)),
            ("thread_name_prefix", Json::str("bio-read-")),
            ("state", Json::str("D")),
            ("io_type", Json::str("R")),
            ("io_bytes", Json::Int(512)),
            ("direct", Json::Bool(true)),
            ("sectors_per_thread", Json::Int(self.sectors as i64)),
            ("pattern", Json::str("sequential")),
            ("cpu_bound", Json::Bool(false)),
            ("read_function", Json::str("bio_read_sectors")),
        ])
    }

    fn run(&self, ctx: &Ctx) -> Result<(), String> {
        let path = ctx.scratch().file(FILE);
        let bytes = self.threads * self.sectors * 512;
        ctx.scratch().reserve(bytes)?;
        create_file(&path, bytes).map_err(|e| format!("create {}: {e}", path.display()))?;
        let io = logical_block(&path)
            .map_err(|e| format!("O_DIRECT read of {}: {e}", path.display()))?;
        eprintln!(
            "bio: pid {} {} threads reading {}-byte sectors of {} with O_DIRECT",
            std::process::id(),
            self.threads,
            io,
            path.display()
        );
        let stop_at = ctx.deadline;
        let rounds = self.rounds.unwrap_or(u64::MAX);
        let handles: Vec<_> = (0..self.threads)
            .map(|t| {
                let path = path.clone();
                let (sectors, sleep) = (self.sectors, self.sleep);
                std::thread::Builder::new()
                    .name(format!("bio-read-{t}"))
                    .spawn(move || -> std::io::Result<()> {
                        let file = OpenOptions::new()
                            .read(true)
                            .custom_flags(libc::O_DIRECT)
                            .open(&path)?;
                        let mut buf = AlignedBuf::new(io);
                        let live = || stop_at.is_none_or(|d| std::time::Instant::now() < d);
                        for _ in 0..rounds {
                            let first = t * sectors * 512 / io as u64 * io as u64;
                            bio_read_sectors(
                                &file,
                                &mut buf,
                                first,
                                sectors * 512 / io as u64,
                                &live,
                            )?;
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

/// One round of one thread: `count` synchronous reads of consecutive blocks.
#[inline(never)]
fn bio_read_sectors(
    file: &File,
    buf: &mut AlignedBuf,
    first: u64,
    count: u64,
    live: &dyn Fn() -> bool,
) -> std::io::Result<()> {
    let len = buf.len as u64;
    for i in 0..count {
        // SAFETY: buf is valid for len bytes.
        let n = unsafe {
            libc::pread(
                file.as_raw_fd(),
                buf.ptr.cast(),
                buf.len,
                (first + i * len) as i64,
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if i % 64 == 0 && !live() {
            break;
        }
    }
    Ok(())
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

/// A page-aligned buffer, as O_DIRECT requires.
struct AlignedBuf {
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

fn main() {
    kdiag_workloads::main::<Bio>()
}
