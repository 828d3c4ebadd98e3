//! memory: the 3-memory exercise. Copies SRC to DST, MODE 0 with mmap +
//! memcpy, MODE 1 with read/write through a BLK-byte buffer, and prints how
//! long the copy took. Small blocks make read/write pay two system calls per
//! block; mmap pays page faults but no per-block calls.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use kdiag_workloads::{Cli, Ctx, Json, Rng, Workload};

struct Memory {
    mode: u8,
    block: usize,
    src: String,
    dst: String,
    size: u64,
    verify: bool,
    seed: u64,
}

impl Workload for Memory {
    const NAME: &'static str = "memory";
    const USAGE: &'static str = "MODE BLK [SRC] [DST] [--size SIZE] [--verify]\n\n\
        Copies SRC to DST: MODE 0 with mmap + memcpy, MODE 1 with read/write\n\
        through a BLK-byte buffer (e.g. 1K, 64K). A relative SRC is created in\n\
        the scratch directory with SIZE bytes (default 64M); DST is always\n\
        written there. --verify compares DST with SRC afterwards.";
    const OPTIONS: &'static [&'static str] = &["--size"];
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
        let block = kdiag_workloads::cli::parse_size(blk)
            .filter(|b| (1..=64 << 20).contains(b))
            .ok_or(format!("BLK must be a size between 1 and 64M, not {blk:?}"))?;
        let src = cli.positional(2).unwrap_or("src.bin").to_string();
        let dst = cli.positional(3).unwrap_or("dst.bin").to_string();
        if Path::new(&dst).is_absolute() || dst.contains("..") {
            return Err(
                "DST must be a plain name: it is written inside the scratch directory".into(),
            );
        }
        let seeded_size = if cli.seeded() {
            Rng::new(cli.seed(), "memory").range(32, 96) << 20
        } else {
            64 << 20
        };
        let size = cli.try_size("--size")?.unwrap_or(seeded_size);
        Ok(Memory {
            mode,
            block: block as usize,
            src,
            dst,
            size,
            verify: cli.flag("--verify"),
            seed: cli.seed(),
        })
    }

    fn expect(&self, scratch: &Path) -> Json {
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
            ("bytes", Json::Int(self.bytes(scratch) as i64)),
            (
                "src",
                Json::str(self.src_path(scratch).display().to_string()),
            ),
            (
                "dst",
                Json::str(scratch.join(&self.dst).display().to_string()),
            ),
            ("faster_mode", Json::Int(0)),
            (
                "syscalls",
                if self.mode == 1 {
                    // One read and one write per block, plus the read that sees EOF.
                    let blocks = self.bytes(scratch).div_ceil(self.block as u64);
                    Json::Int(2 * blocks as i64 + 1)
                } else {
                    Json::Null
                },
            ),
            (
                "copy_function",
                Json::str(if self.mode == 0 {
                    "copy_mmap"
                } else {
                    "copy_read_write"
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
        let (start, cpu0) = (Instant::now(), cpu_times());
        let copied = if self.mode == 0 {
            copy_mmap(&src, &dst)
        } else {
            copy_read_write(&src, &dst, self.block)
        }
        .map_err(|e| format!("copy {} to {}: {e}", src.display(), dst.display()))?;
        let (elapsed, cpu1) = (start.elapsed(), cpu_times());
        println!(
            "memory: copied {copied} bytes with {} (block {}) in {:.6} s (cpu {:.6} s user + {:.6} s sys)",
            if self.mode == 0 { "mmap" } else { "read/write" },
            self.block,
            elapsed.as_secs_f64(),
            cpu1.0 - cpu0.0,
            cpu1.1 - cpu0.1,
        );
        if self.verify {
            verify(&src, &dst).map_err(|e| format!("verify: {e}"))?;
            println!(
                "memory: verified: {} and {} are identical",
                src.display(),
                dst.display()
            );
        }
        Ok(())
    }
}

impl Memory {
    /// Bytes to copy: SIZE for a created source, else the given file's length.
    fn bytes(&self, scratch: &Path) -> u64 {
        if Path::new(&self.src).is_absolute() {
            std::fs::metadata(self.src_path(scratch)).map_or(0, |m| m.len())
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

/// MODE 0: map both files and memcpy.
#[inline(never)]
fn copy_mmap(src: &Path, dst: &Path) -> std::io::Result<u64> {
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
        std::ptr::copy_nonoverlapping(from, to, len as usize);
        libc::munmap(from.cast(), len as usize);
        libc::munmap(to.cast(), len as usize);
    }
    Ok(len)
}

/// MODE 1: read and write through a `block`-byte buffer.
#[inline(never)]
fn copy_read_write(src: &Path, dst: &Path, block: usize) -> std::io::Result<u64> {
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

fn main() {
    kdiag_workloads::main::<Memory>()
}
