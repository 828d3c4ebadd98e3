//! mem-leak: the trend case. A "cache" that is never evicted grows by a
//! fixed chunk at a steady rate, so RSS climbs linearly until a cap, then
//! stays there until --duration ends.
//!
//! Seeded: the rate, the chunk size, the cap, the name of the function
//! that leaks.

use std::mem::MaybeUninit;
use std::time::Duration;

use crate::{Cli, Ctx, Json, Storage, Workload};

/// The function that allocates, touches and keeps a chunk; index 0 is the
/// default layout's.
pub mod leak {
    use std::mem::MaybeUninit;

    crate::named_fns! {
        fn [
            leak_chunk, cache_response, remember_session, intern_strings, buffer_event,
            store_thumbnail, memoize_result, keep_history_entry, retain_packet,
            record_trace_span, stash_upload_part, hold_query_plan,
        ](cache: &mut Vec<Box<[MaybeUninit<u8>]>>, size: usize, tag: u64) -> usize, |salt| {
            // Every page written here, so the chunk is resident and its page
            // faults are this function's; kept forever. Not zeroed: calloc
            // would fault most pages in glibc's memset, whose callchain
            // skips this frame (glibc keeps no frame pointers).
            let mut chunk = Box::new_uninit_slice(size);
            for page in chunk.chunks_mut(4096) {
                page[0].write((tag ^ salt) as u8 | 1);
            }
            cache.push(chunk);
            cache.len()
        }
    }
}

pub struct MemLeak {
    rate: u64,
    cap: u64,
    chunk: u64,
    function: usize,
}

impl Workload for MemLeak {
    const NAME: &'static str = "mem-leak";
    const STORAGE: Storage = Storage::None;
    const USAGE: &'static str = "[--rate SIZE] [--cap SIZE]\n\n\
        Leaks SIZE bytes per second (default 4M) in 64 KiB chunks it writes to,\n\
        so RSS grows steadily, up to --cap (default 256M).";
    const OPTIONS: &'static [&'static str] = &["--rate", "--cap"];

    fn from_cli(cli: &Cli) -> Result<Self, String> {
        let mut rng = cli.seed().rng("mem-leak");
        let (rate, cap, chunk, function) = if cli.seeded() {
            (
                rng.range(8, 32) << 18,    // 2 to 8 MiB/s in 256 KiB/s steps
                rng.range(6, 16) << 25,    // 192 to 512 MiB in 32 MiB steps
                16 << (10 + rng.below(5)), // 16 to 256 KiB
                rng.below(leak::NAMES.len() as u64) as usize,
            )
        } else {
            (4 << 20, 256 << 20, 64 << 10, 0)
        };
        let rate = cli.try_size("--rate")?.unwrap_or(rate);
        let cap = cli.try_size("--cap")?.unwrap_or(cap);
        if rate == 0 || cap > 4 << 30 {
            return Err("--rate must be positive and --cap at most 4G".into());
        }
        Ok(MemLeak {
            rate,
            cap,
            chunk,
            function,
        })
    }

    fn expect(&self) -> Json {
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
            // When RSS reaches the cap, in seconds after the start.
            (
                "cap_after_s",
                Json::Num((self.cap * 10 / self.rate) as f64 / 10.0),
            ),
            ("chunk_bytes", Json::Int(self.chunk as i64)),
            ("leak_function", Json::str(leak::NAMES[self.function])),
        ])
    }

    fn run(&self, ctx: &Ctx) -> Result<(), String> {
        ctx.announce(|| {
            format!(
                "leaking {} KiB/s up to {} MiB",
                self.rate >> 10,
                self.cap >> 20
            )
        });
        let leak_one = leak::FNS[self.function];
        let mut cache: Vec<Box<[MaybeUninit<u8>]>> = Vec::new();
        let mut leaked = 0u64;
        let tick = Duration::from_secs_f64(self.chunk as f64 / self.rate as f64);
        let start = std::time::Instant::now();
        while ctx.running() {
            // Leak on schedule (catching up after a slow tick) until the cap.
            let due = (start.elapsed().as_secs_f64() * self.rate as f64) as u64;
            while leaked < due.min(self.cap) {
                leak_one(&mut cache, self.chunk as usize, leaked);
                leaked += self.chunk;
            }
            ctx.sleep(tick.max(Duration::from_millis(10)));
        }
        ctx.report(
            || format!("leaked {} MiB", leaked >> 20),
            || "stopped".to_string(),
        );
        Ok(())
    }
}
