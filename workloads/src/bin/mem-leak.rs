//! mem-leak: the trend case. A "cache" that is never evicted grows by a
//! fixed chunk at a steady rate, so RSS climbs linearly until a cap, then
//! stays there until --duration ends.

use std::path::Path;
use std::time::Duration;

use kdiag_workloads::{Cli, Ctx, Json, Rng, Storage, Workload};

struct MemLeak {
    rate: u64,
    cap: u64,
    chunk: u64,
}

impl Workload for MemLeak {
    const NAME: &'static str = "mem-leak";
    const STORAGE: Storage = Storage::None;
    const USAGE: &'static str = "[--rate SIZE] [--cap SIZE]\n\n\
        Leaks SIZE bytes per second (default 4M) in 64 KiB chunks it writes to,\n\
        so RSS grows steadily, up to --cap (default 256M).";
    const OPTIONS: &'static [&'static str] = &["--rate", "--cap"];

    fn from_cli(cli: &Cli) -> Result<Self, String> {
        let rate = if cli.seeded() {
            Rng::new(cli.seed(), "mem-leak").range(2, 8) << 20
        } else {
            4 << 20
        };
        let rate = cli.try_size("--rate")?.unwrap_or(rate);
        let cap = cli.try_size("--cap")?.unwrap_or(256 << 20);
        if rate == 0 || cap > 4 << 30 {
            return Err("--rate must be positive and --cap at most 4G".into());
        }
        Ok(MemLeak {
            rate,
            cap,
            chunk: 64 << 10,
        })
    }

    fn expect(&self, _scratch: &Path) -> Json {
        Json::obj([
            ("class", Json::str("memory-trend")),
            (
                "summary",
                Json::str("resident memory grows linearly: a leak"),
            ),
            ("metric", Json::str("rss")),
            ("trend", Json::str("increasing")),
            ("rate_bytes_per_s", Json::Int(self.rate as i64)),
            ("cap_bytes", Json::Int(self.cap as i64)),
            ("chunk_bytes", Json::Int(self.chunk as i64)),
            ("leak_function", Json::str("leak_chunk")),
        ])
    }

    fn run(&self, ctx: &Ctx) -> Result<(), String> {
        eprintln!(
            "mem-leak: pid {} leaking {} KiB/s up to {} MiB",
            std::process::id(),
            self.rate >> 10,
            self.cap >> 20
        );
        let mut cache: Vec<Vec<u8>> = Vec::new();
        let mut leaked = 0u64;
        let tick = Duration::from_secs_f64(self.chunk as f64 / self.rate as f64);
        let start = std::time::Instant::now();
        while ctx.running() {
            // Leak on schedule (catching up after a slow tick) until the cap.
            let due = (start.elapsed().as_secs_f64() * self.rate as f64) as u64;
            while leaked < due.min(self.cap) {
                leak_chunk(&mut cache, self.chunk as usize, leaked);
                leaked += self.chunk;
            }
            ctx.sleep(tick.max(Duration::from_millis(10)));
        }
        println!("mem-leak: leaked {} MiB", leaked >> 20);
        Ok(())
    }
}

/// Allocate a chunk, write every page (so it is resident) and keep it forever.
#[inline(never)]
fn leak_chunk(cache: &mut Vec<Vec<u8>>, size: usize, salt: u64) {
    let mut chunk = vec![0u8; size];
    for page in chunk.chunks_mut(4096) {
        page[0] = salt as u8 | 1;
    }
    cache.push(chunk);
}

fn main() {
    kdiag_workloads::main::<MemLeak>()
}
