//! io-app: the 0-demo exercise. Opens its data file with O_SYNC and rewrites
//! the same region (10 MiB by default) with one large synchronous write per
//! pass, seeking back to 0 each time, until --duration ends.

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use kdiag_workloads::{Cli, Ctx, Json, Rng, Storage, Workload};

struct IoApp {
    file: String,
    size: u64,
    pause: std::time::Duration,
}

impl Workload for IoApp {
    const NAME: &'static str = "io-app";
    const USAGE: &'static str = "[--size SIZE] [--pause D]\n\n\
        Rewrites the same SIZE-byte region (default 10M) of an O_SYNC file forever,\n\
        one write(2) of SIZE bytes per pass, then lseek(0); optionally sleeps D\n\
        between passes (default 0: as fast as the disk allows, like the original).";
    const OPTIONS: &'static [&'static str] = &["--size", "--pause"];
    const STORAGE: Storage = Storage::Disk;

    fn from_cli(cli: &Cli) -> Result<Self, String> {
        let mut rng = Rng::new(cli.seed(), "io-app");
        let (file, seeded_size) = if cli.seeded() {
            (
                format!("data-{:04x}.bin", rng.next_u64() & 0xffff),
                rng.range(6, 16) << 20,
            )
        } else {
            ("lab008.data".to_string(), 10 << 20)
        };
        let size = cli.try_size("--size")?.unwrap_or(seeded_size);
        if size == 0 || size > 1 << 30 {
            return Err("--size must be between 1 byte and 1G".into());
        }
        let pause = match cli.raw("--pause") {
            Some(s) => kdiag_workloads::cli::parse_duration(s)
                .ok_or(format!("--pause: bad value {s:?}"))?,
            None => std::time::Duration::ZERO,
        };
        Ok(IoApp { file, size, pause })
    }

    fn expect(&self, scratch: &Path) -> Json {
        Json::obj([
            ("class", Json::str("io")),
            (
                "summary",
                Json::str(
                    "endless large synchronous (O_SYNC) writes rewriting the same file region",
                ),
            ),
            (
                "file",
                Json::str(scratch.join(&self.file).display().to_string()),
            ),
            ("open_flags", Json::strs(["O_WRONLY", "O_CREAT", "O_SYNC"])),
            ("sync", Json::Bool(true)),
            ("syscall", Json::str("write")),
            ("write_bytes", Json::Int(self.size as i64)),
            ("region_offset", Json::Int(0)),
            ("region_bytes", Json::Int(self.size as i64)),
            ("pattern", Json::str("repeated-range")),
            ("io_type", Json::str("WS")),
            ("hot_path", Json::strs(["write", "ksys_write", "vfs_write"])),
        ])
    }

    fn run(&self, ctx: &Ctx) -> Result<(), String> {
        let path = ctx.scratch().file(&self.file);
        ctx.scratch().reserve(self.size)?;
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .mode(0o644)
            .custom_flags(libc::O_SYNC)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let buf = vec![0u8; self.size as usize];
        eprintln!(
            "io-app: pid {} rewriting {} bytes of {} with O_SYNC",
            std::process::id(),
            self.size,
            path.display()
        );
        while ctx.running() {
            write_pass(&mut file, &buf).map_err(|e| format!("write {}: {e}", path.display()))?;
            if !self.pause.is_zero() {
                ctx.sleep(self.pause);
            }
        }
        Ok(())
    }
}

/// One pass: a single large write of the whole region, then back to 0.
#[inline(never)]
fn write_pass(file: &mut std::fs::File, buf: &[u8]) -> std::io::Result<()> {
    file.write_all(buf)?;
    file.seek(SeekFrom::Start(0))?;
    Ok(())
}

fn main() {
    kdiag_workloads::main::<IoApp>()
}
