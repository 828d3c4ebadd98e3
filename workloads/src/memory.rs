//! memory: the 3-memory exercise. Copies SRC to DST, MODE 0 with mmap +
//! memcpy, MODE 1 with read/write through a BLK-byte buffer, and prints how
//! long the copy took. Small blocks make read/write pay two system calls per
//! block; mmap pays page faults but no per-block calls.
//!
//! Seeded: the copy's size, the default source and destination names, the
//! names of the two copy functions. Not seeded (conceptual): mmap is faster
//! than read/write at small blocks.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::{Cli, Ctx, Json, Rng, Workload};

/// MODE 0's copy function; index 0 is the default layout's.
pub mod mapped {
    use super::*;
    crate::named_fns! {
        fn [
            copy_mmap, mirror_mapped_file, clone_via_mapping, map_and_duplicate,
            project_pages, replicate_mapping, shadow_copy_pages, blit_file_pages,
            transfer_mapped, splice_mappings, copy_view, twin_mapped_image,
        ](src: &Path, dst: &Path, block: usize) -> std::io::Result<u64>, |salt| {
            copy_mapped(src, dst, block)
        }
    }
}

/// A copy function of either mode: bytes copied from SRC to DST.
type CopyFn = fn(&Path, &Path, usize) -> std::io::Result<u64>;

/// MODE 1's copy function; index 0 is the default layout's.
pub mod buffered {
    use super::*;
    crate::named_fns! {
        fn [
            copy_read_write, stream_copy_file, pump_blocks, relay_file_chunks,
            shuttle_buffers, ferry_records, transfer_by_blocks, chunked_duplicate,
            move_through_buffer, spool_file_copy, drain_into_copy, batch_copy_file,
        ](src: &Path, dst: &Path, block: usize) -> std::io::Result<u64>, |salt| {
            let mut input = File::open(src)?;
            let mut output = File::create(dst)?;
            let mut buf = vec![0u8; block];
            let mut total = 0u64;
            loop {
                let n = input.read(&mut buf)?;
                if n == 0 {
                    return Ok(total);
                }
                output.write_all(&buf[..n])?;
                total += n as u64;
            }
        }
    }
}

pub struct Memory {
    mode: u8,
    block: usize,
    src: String,
    dst: String,
    size: u64,
    verify: bool,
    seed: u64,
    function: usize,
    /// Copies to make back to back, then stop (`--copies`): a timing of
    /// several copies outweighs the source's creation and the noise.
    copies: Option<u64>,
}

impl Workload for Memory {
    const NAME: &'static str = "memory";
    const USAGE: &'static str = "MODE BLK [SRC] [DST] [--size SIZE] [--copies N] [--verify]\n\n\
        Copies SRC to DST: MODE 0 with mmap + memcpy, MODE 1 with read/write\n\
        through a BLK-byte buffer (e.g. 1K, 64K). A relative SRC is created in\n\
        the scratch directory with SIZE bytes (default 64M); DST is always\n\
        written there. --copies N copies N times back to back, then stops.\n\
        --verify compares DST with SRC afterwards.";
    const OPTIONS: &'static [&'static str] = &["--size", "--copies"];
    const FLAGS: &'static [&'static str] = &["--verify"];
    const SCRATCH_CAP: u64 = 512 << 20;
    const DURATION: Option<std::time::Duration> = None;

    fn from_cli(cli: &Cli) -> Result<Self, String> {
        let mode = match cli.positional(0) {
            Some("0") => 0,
            Some("1") => 1,
            Some(m) => {
                return Err(format!(
                    "MODE must be 0 (mmap) or 1 (read/write), not {m:?}"
                ));
            }
            None => return Err("missing MODE: 0 (mmap) or 1 (read/write)".into()),
        };
        let blk = cli
            .positional(1)
            .ok_or("missing BLK, the block size (e.g. 1K)")?;
        let block = crate::cli::parse_size(blk)
            .filter(|b| (1..=64 << 20).contains(b))
            .ok_or(format!("BLK must be a size between 1 and 64M, not {blk:?}"))?;
        let mut rng = cli.seed().rng("memory");
        let (src, dst, seeded_size, function) = if cli.seeded() {
            let stem = rng.pick(&["photo", "video", "backup", "dataset", "disk", "model"]);
            let n = rng.below(0x1_0000);
            let ext = rng.pick(&["img", "bin", "raw", "dat"]);
            let size = rng.range(8, 24) << 22; // 32 to 96 MiB in 4 MiB steps
            let names = mapped::NAMES.len().min(buffered::NAMES.len());
            let function = rng.below(names as u64) as usize;
            (
                format!("{stem}-{n:04x}.{ext}"),
                format!("{stem}-{n:04x}-copy.{ext}"),
                size,
                function,
            )
        } else {
            ("src.bin".to_string(), "dst.bin".to_string(), 64 << 20, 0)
        };
        let src = cli.positional(2).map_or(src, str::to_string);
        let dst = cli.positional(3).map_or(dst, str::to_string);
        if Path::new(&dst).is_absolute() || dst.contains("..") {
            return Err(
                "DST must be a plain name: it is written inside the scratch directory".into(),
            );
        }
        let size = cli.try_size("--size")?.unwrap_or(seeded_size);
        Ok(Memory {
            mode,
            block: block as usize,
            src,
            dst,
            size,
            verify: cli.flag("--verify"),
            seed: cli.seed().hash(),
            function,
            copies: match cli.try_value::<u64>("--copies")? {
                Some(0) => return Err("--copies must be at least 1".into()),
                n => n,
            },
        })
    }

    fn expect(&self) -> Json {
        Json::obj([
            ("class", Json::str("syscall-overhead")),
            (
                "summary",
                Json::str(
                    "read/write with small blocks is dominated by system calls; mmap or large page-multiple blocks are faster",
                ),
            ),
            ("mode", Json::Int(self.mode as i64)),
            (
                "mechanism",
                Json::str(if self.mode == 0 { "mmap" } else { "read-write" }),
            ),
            ("block_bytes", Json::Int(self.block as i64)),
            ("bytes", Json::Int(self.bytes() as i64)),
            // Names in the scratch directory (a path only for a given absolute SRC).
            ("src", Json::str(&self.src)),
            ("dst", Json::str(&self.dst)),
            // Below a page, read/write pays two system calls per block and
            // mmap wins; from a page up, read/write's one copy beats mmap's
            // page faults (tests/symptoms: 1K and 64K).
            (
                "faster_mode",
                Json::Int(if self.block < 4096 { 0 } else { 1 }),
            ),
            (
                "syscalls",
                if self.mode == 1 {
                    // One read and one write per block, plus the read that sees EOF.
                    let blocks = self.bytes().div_ceil(self.block as u64);
                    Json::Int(2 * blocks as i64 + 1)
                } else {
                    Json::Null
                },
            ),
            (
                "copy_function",
                Json::str(if self.mode == 0 {
                    mapped::NAMES[self.function]
                } else {
                    buffered::NAMES[self.function]
                }),
            ),
        ])
    }

    fn run(&self, ctx: &Ctx) -> Result<(), String> {
        let src = self.src_path(ctx.scratch().path());
        let dst = ctx.scratch().file(&self.dst);
        if Path::new(&self.src).is_relative() {
            ctx.scratch().reserve(self.size)?;
            create_source(&src, self.size, self.seed)
                .map_err(|e| format!("create {}: {e}", src.display()))?;
        }
        let len = std::fs::metadata(&src)
            .map_err(|e| format!("{}: {e}", src.display()))?
            .len();
        ctx.scratch().reserve(len)?;
        let copy = match self.mode {
            0 => mapped::FNS[self.function],
            _ => buffered::FNS[self.function],
        };
        for n in 1.. {
            self.copy_once(ctx, copy, &src, &dst)?;
            match self.copies {
                Some(copies) if n >= copies || !ctx.running() => break,
                Some(_) => continue,
                None if !ctx.again() => break,
                // A backup job between runs: the learner sees bursts.
                None => ctx.sleep(std::time::Duration::from_millis(100)),
            }
        }
        if self.verify {
            verify(&src, &dst).map_err(|e| format!("verify: {e}"))?;
            ctx.report(
                || {
                    format!(
                        "verified: {} and {} are identical",
                        src.display(),
                        dst.display()
                    )
                },
                || "verified: the copy is identical".to_string(),
            );
        }
        Ok(())
    }
}

impl Memory {
    /// Copy SRC to DST once with `copy` and report the time it took.
    fn copy_once(&self, ctx: &Ctx, copy: CopyFn, src: &Path, dst: &Path) -> Result<(), String> {
        let (start, cpu0) = (Instant::now(), cpu_times());
        let copied = copy(src, dst, self.block)
            .map_err(|e| format!("copy {} to {}: {e}", src.display(), dst.display()))?;
        let (elapsed, cpu1) = (start.elapsed(), cpu_times());
        let how = if self.mode == 0 { "mmap" } else { "read/write" };
        let timing = format!(
            "in {:.6} s (cpu {:.6} s user + {:.6} s sys)",
            elapsed.as_secs_f64(),
            cpu1.0 - cpu0.0,
            cpu1.1 - cpu0.1,
        );
        ctx.report(
            || {
                format!(
                    "copied {copied} bytes with {how} (block {}) {timing}",
                    self.block
                )
            },
            || format!("copied with {how} (block {}) {timing}", self.block),
        );
        Ok(())
    }

    /// Bytes to copy: SIZE for a created source, else the given file's length.
    fn bytes(&self) -> u64 {
        if Path::new(&self.src).is_absolute() {
            std::fs::metadata(&self.src).map_or(0, |m| m.len())
        } else {
            self.size
        }
    }

    fn src_path(&self, scratch: &Path) -> PathBuf {
        if Path::new(&self.src).is_absolute() {
            PathBuf::from(&self.src)
        } else {
            scratch.join(&self.src)
        }
    }
}

/// Deterministic pseudo-random content, so a wrong copy cannot pass --verify.
fn create_source(path: &Path, size: u64, seed: u64) -> std::io::Result<()> {
    let mut file = File::create(path)?;
    let mut rng = Rng::new(seed, "memory-content");
    let mut chunk = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        for word in chunk.chunks_mut(8) {
            word.copy_from_slice(&rng.next_u64().to_le_bytes()[..word.len()]);
        }
        let n = left.min(chunk.len() as u64) as usize;
        file.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// (user, system) CPU seconds of this process so far.
fn cpu_times() -> (f64, f64) {
    // SAFETY: ru is a plain out-parameter.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime), secs(ru.ru_stime))
}

/// MODE 0: map both files and memcpy, `block` bytes per call, as the
/// original does (the block size barely matters here).
fn copy_mapped(src: &Path, dst: &Path, block: usize) -> std::io::Result<u64> {
    let input = File::open(src)?;
    let len = input.metadata()?.len();
    let output = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dst)?;
    output.set_len(len)?;
    if len == 0 {
        return Ok(0);
    }
    let map = |fd: i32, prot: i32| {
        // SAFETY: a fresh shared mapping of a file of at least len bytes.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                prot,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(p as *mut u8)
        }
    };
    let from = map(input.as_raw_fd(), libc::PROT_READ)?;
    let to = map(output.as_raw_fd(), libc::PROT_READ | libc::PROT_WRITE)?;
    // SAFETY: both mappings are len bytes long and distinct; unmapped once.
    unsafe {
        let mut done = 0usize;
        while done < len as usize {
            let n = block.min(len as usize - done);
            std::ptr::copy_nonoverlapping(from.add(done), to.add(done), n);
            done += n;
        }
        libc::munmap(from.cast(), len as usize);
        libc::munmap(to.cast(), len as usize);
    }
    Ok(len)
}

fn verify(a: &Path, b: &Path) -> Result<(), String> {
    let (mut fa, mut fb) = (
        File::open(a).map_err(|e| e.to_string())?,
        File::open(b).map_err(|e| e.to_string())?,
    );
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    let mut offset = 0u64;
    loop {
        let na = read_full(&mut fa, &mut ba).map_err(|e| e.to_string())?;
        let nb = read_full(&mut fb, &mut bb).map_err(|e| e.to_string())?;
        if na != nb || ba[..na] != bb[..nb] {
            return Err(format!(
                "{} and {} differ after byte {offset}",
                a.display(),
                b.display()
            ));
        }
        if na == 0 {
            return Ok(());
        }
        offset += na as u64;
    }
}

fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}
