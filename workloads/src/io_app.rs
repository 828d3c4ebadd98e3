//! io-app: the 0-demo exercise. Opens its data file with O_SYNC and rewrites
//! the same region (10 MiB by default) with one large synchronous write per
//! pass, seeking back to 0 each time, until --duration ends.
//!
//! Seeded: the file's name, the region's size, the name of the function
//! that writes.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;

use crate::{Cli, Ctx, Json, Storage, Workload};

/// The function doing each pass; index 0 is the default layout's.
pub mod pass {
    use super::*;
    crate::named_fns! {
        fn [
            write_pass, flush_ledger, persist_journal, commit_records, sync_snapshot,
            store_checkpoint, save_index_block, dump_state_table, push_segment,
            spill_buffer_pool, mirror_region, archive_chunk, stamp_pages,
            rewrite_extent, journal_commit_pass, refresh_cache_file,
        ](file: &mut File, buf: &[u8]) -> std::io::Result<()>, |salt| {
            // One pass: a single large write of the whole region, then back to 0.
            file.write_all(buf)?;
            file.seek(SeekFrom::Start(0))?;
            Ok(())
        }
    }
}

/// Seeded data file names: a stem, a number, an extension.
pub(crate) fn data_file(rng: &mut crate::Rng) -> String {
    const STEMS: &[&str] = &[
        "ledger",
        "journal",
        "events",
        "metrics",
        "orders",
        "audit",
        "state",
        "records",
        "session",
        "inventory",
        "billing",
        "telemetry",
        "catalog",
        "queue",
        "archive",
        "index",
    ];
    const EXTS: &[&str] = &["dat", "bin", "db", "log", "img", "blk"];
    let stem = rng.pick(STEMS);
    let n = rng.below(0x1_0000);
    format!("{stem}-{n:04x}.{}", rng.pick(EXTS))
}

pub struct IoApp {
    file: String,
    size: u64,
    pause: Duration,
    function: usize,
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
        let mut rng = cli.seed().rng("io-app");
        let (file, seeded_size, function) = if cli.seeded() {
            (
                data_file(&mut rng),
                rng.range(12, 32) << 19, // 6 to 16 MiB in 512 KiB steps
                rng.below(pass::NAMES.len() as u64) as usize,
            )
        } else {
            ("lab008.data".to_string(), 10 << 20, 0)
        };
        let size = cli.try_size("--size")?.unwrap_or(seeded_size);
        if size == 0 || size > 1 << 30 {
            return Err("--size must be between 1 byte and 1G".into());
        }
        let pause = match cli.raw("--pause") {
            Some(s) => crate::cli::parse_duration(s).ok_or(format!("--pause: bad value {s:?}"))?,
            None => Duration::ZERO,
        };
        Ok(IoApp {
            file,
            size,
            pause,
            function,
        })
    }

    fn expect(&self) -> Json {
        Json::obj([
            ("class", Json::str("io")),
            (
                "summary",
                Json::str(
                    "endless large synchronous (O_SYNC) writes rewriting the same file region",
                ),
            ),
            ("file", Json::str(&self.file)),
            ("open_flags", Json::strs(["O_WRONLY", "O_CREAT", "O_SYNC"])),
            ("sync", Json::Bool(true)),
            ("syscall", Json::str("write")),
            ("write_bytes", Json::Int(self.size as i64)),
            ("region_offset", Json::Int(0)),
            ("region_bytes", Json::Int(self.size as i64)),
            ("pattern", Json::str("repeated-range")),
            ("io_type", Json::str("WS")),
            ("hot_path", Json::strs(["write", "ksys_write", "vfs_write"])),
            ("write_function", Json::str(pass::NAMES[self.function])),
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
        ctx.announce(|| {
            format!(
                "rewriting {} bytes of {} with O_SYNC",
                self.size,
                path.display()
            )
        });
        let write_pass = pass::FNS[self.function];
        while ctx.running() {
            write_pass(&mut file, &buf).map_err(|e| format!("write {}: {e}", path.display()))?;
            if !self.pause.is_zero() {
                ctx.sleep(self.pause);
            }
        }
        Ok(())
    }
}
