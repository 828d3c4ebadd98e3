//! Instruments: what each kdiag command collects, built on the kernel
//! interfaces of `sys/` and producing `model/` types. One folder per
//! instrument; an instrument with several tracing tiers puts them behind the
//! one [`Source`] trait and opens them with [`open`], so tiers never import
//! each other and commands never name a tier's type.

pub mod block;
pub mod doctor;
pub mod exec;
pub mod observe;
pub mod offcpu;
pub mod profile;
pub mod watch;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The tracing tier a user asks for (`--tier`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// BPF where the kernel allows it, else perf
    Auto,
    /// BPF programs: exact matching, user strings, in-kernel aggregation
    Bpf,
    /// perf_event_open tracepoints
    Perf,
}

impl Tier {
    /// "bpf" or "perf" (or "auto"), as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Auto => "auto",
            Tier::Bpf => "bpf",
            Tier::Perf => "perf",
        }
    }
}

/// A running trace of one instrument, whatever its tier. Dropping it
/// detaches everything it attached.
pub trait Source {
    /// What it yields.
    type Event;
    /// The tier it runs on (never `Auto`).
    fn tier(&self) -> Tier;
    /// Wait up to `timeout` for events and append them, in time order.
    fn poll(&mut self, timeout: Duration, out: &mut Vec<Self::Event>) -> anyhow::Result<()>;
    /// At the end: append what is still pending (requests in flight).
    fn finish(&mut self, _out: &mut Vec<Self::Event>) -> anyhow::Result<()> {
        Ok(())
    }
    /// Events the kernel dropped (ring full).
    fn lost(&self) -> u64;
    /// What this tier could not see, for the user.
    fn notes(&self) -> Vec<String>;
}

/// Open the tier asked for. `Auto` tries BPF, then perf, and returns a note
/// saying why it fell back.
pub fn open<S: ?Sized>(
    tier: Tier,
    bpf: impl FnOnce() -> anyhow::Result<Box<S>>,
    perf: impl FnOnce() -> anyhow::Result<Box<S>>,
) -> anyhow::Result<(Box<S>, Option<String>)> {
    match tier {
        Tier::Bpf => Ok((bpf()?, None)),
        Tier::Perf => Ok((perf()?, None)),
        Tier::Auto => match bpf() {
            Ok(s) => Ok((s, None)),
            Err(e) => Ok((
                perf()?,
                Some(format!("BPF tier unavailable ({e:#}); using the perf tier")),
            )),
        },
    }
}

/// One window of a drill-down or panel: `step` is called with how long it
/// may wait (at most 100 ms, never past the end) until `window` has passed
/// or `stop` is set.
pub fn for_window(
    window: Duration,
    stop: &AtomicBool,
    mut step: impl FnMut(Duration) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let start = Instant::now();
    while start.elapsed() < window && !stop.load(Ordering::Relaxed) {
        step(
            window
                .saturating_sub(start.elapsed())
                .min(Duration::from_millis(100)),
        )?;
    }
    Ok(())
}
