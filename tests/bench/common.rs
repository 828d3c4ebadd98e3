//! Shared by the benchmarks (`cargo bench`): timing helpers and writing a
//! result section into docs/PERFORMANCE.md between markers, so each benchmark
//! owns its section and re-running it replaces only that section.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Wall time of `f`.
pub fn time<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let v = f();
    (v, start.elapsed())
}

/// The median of a set of durations.
pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The workspace root (where Cargo.toml is).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Replace the section `name` of docs/PERFORMANCE.md (between
/// `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`) with `body`, appending the
/// section if it is not there yet.
pub fn write_section(name: &str, body: &str) {
    let path = root().join("docs/PERFORMANCE.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|_| "# Performance\n".into());
    let open = format!("<!-- bench:{name} -->");
    let close = format!("<!-- /bench:{name} -->");
    let section = format!("{open}\n{}\n{close}", body.trim_end());
    let new = match (text.find(&open), text.find(&close)) {
        (Some(a), Some(b)) if a < b => {
            format!("{}{}{}", &text[..a], section, &text[b + close.len()..])
        }
        _ => format!("{}\n{}\n", text.trim_end(), section),
    };
    std::fs::write(&path, new).expect("write docs/PERFORMANCE.md");
    println!("{body}");
}

/// A one-line description of this machine for the report.
pub fn machine() -> String {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    format!("Linux {}, {cpus} CPUs", kernel.trim())
}
