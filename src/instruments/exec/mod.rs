//! Exec tracing for exec-trace and execsnoop: the BPF tier (`bpf.rs`, user
//! strings read at syscall entry) and the perf tier (`perf.rs`, tracepoints
//! through perf_event_open), both yielding `model::exec::TraceEvent`s.

pub mod bpf;
pub mod perf;
pub mod source;

pub use source::{ExecSource, Filter, Spawned};

use crate::instruments::{self, Tier};

/// Open the requested tier; the notes say why `auto` fell back, if it did.
pub fn open(
    tier: Tier,
    filter: Filter,
    spawned: Option<Spawned>,
) -> anyhow::Result<(Box<ExecSource>, Vec<String>)> {
    let (source, fallback) = instruments::open(
        tier,
        || Ok(Box::new(bpf::ExecBpf::open(filter)?) as Box<ExecSource>),
        || Ok(Box::new(perf::ExecPerf::open(filter, spawned)?) as Box<ExecSource>),
    )?;
    Ok((source, fallback.into_iter().collect()))
}
