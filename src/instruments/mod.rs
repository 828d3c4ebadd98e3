//! Instruments: what each kdiag command collects, built on the kernel
//! interfaces of `sys/` and producing `model/` types. One folder per
//! instrument; an instrument with several tracing tiers puts them behind the
//! one [`Source`] trait and opens them with [`open`], so tiers never import
//! each other and commands never name a tier's type.

pub mod block;
pub mod blocked;
pub mod continuous;
pub mod doctor;
pub mod elf;
pub mod exec;
pub mod faults;
pub mod observe;
pub mod offcpu;
pub mod procs;
pub mod profile;
pub mod rusage;
pub mod syscalls;
pub mod target;
pub mod trace;
pub mod wall;
pub mod watch;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::model::capability::Probes;
pub use crate::model::capability::Tier;

/// One tier of an instrument, a row of its table.
pub struct TierRow {
    pub tier: Tier,
    /// What it sees: `--tier`'s help for it, and doctor's line where it is
    /// the tier used.
    pub sees: &'static str,
    /// Whether this machine allows it, from doctor's probes.
    pub works: fn(&Probes) -> bool,
}

/// An instrument's tiers, best first: the one source of its `--tier` values
/// and help and of doctor's line for it. Each instrument's `mod.rs` owns
/// its table; [`TABLES`] lists them all.
pub struct Tiers {
    /// The command doctor names it by.
    pub name: &'static str,
    /// `--tier auto`'s help.
    pub auto: &'static str,
    pub rows: &'static [TierRow],
}

impl Tiers {
    /// The tiers that work on a machine with these probes, best first.
    pub fn working(&self, p: &Probes) -> Vec<Tier> {
        self.rows
            .iter()
            .filter(|r| (r.works)(p))
            .map(|r| r.tier)
            .collect()
    }

    /// What `tier` sees.
    pub fn sees(&self, tier: Tier) -> &'static str {
        self.rows
            .iter()
            .find(|r| r.tier == tier)
            .map_or("", |r| r.sees)
    }
}

/// Every instrument's tier table, in the order doctor lists them.
pub const TABLES: &[&Tiers] = &[
    &profile::TIERS,
    &offcpu::TIERS,
    &block::TIERS,
    &exec::TRACE_TIERS,
    &exec::SNOOP_TIERS,
    &faults::TIERS,
    &syscalls::TIERS,
    &watch::TIERS,
];

/// What `--tier` asks for: the best tier the machine allows, or one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    Auto,
    Only(Tier),
}

/// Why [`open`] did not use the instrument's first tier.
#[derive(Debug)]
pub struct Fallback {
    pub from: Tier,
    pub to: Tier,
    pub error: anyhow::Error,
}

impl Fallback {
    /// "BPF tier unavailable (why); using the perf tier".
    pub fn note(&self) -> String {
        format!(
            "{} tier unavailable ({:#}); using the {} tier",
            self.from.label(),
            self.error,
            self.to.name()
        )
    }
}

/// One tier of an instrument, as [`open`] tries it.
pub type Opener<'a, S> = (Tier, Box<dyn FnOnce() -> anyhow::Result<Box<S>> + 'a>);

/// A running trace of one instrument, whatever its tier. Dropping it
/// detaches everything it attached.
pub trait Source {
    /// What it yields.
    type Event;
    /// The tier it runs on.
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

/// A running trace whose result is a report `R`, whatever its tier: a
/// `Profile` (faults', offcpu's, profile's sampler) or `Syscalls`. `F` is
/// what a tier found beside it (offcpu's counters and /proc samples).
/// [`trace::Trace`] drives any of them. Dropping it detaches everything it
/// attached.
pub trait ReportSource<R, F = ()> {
    /// The tier it runs on.
    fn tier(&self) -> Tier;
    /// Watch one more process: a `-- CMD` child, held before its exec,
    /// named `comm` until its exec renames it.
    fn watch(&mut self, tgid: u32, comm: &str) -> anyhow::Result<()>;
    /// Wait up to `timeout`, taking what the tier sees meanwhile.
    fn poll(&mut self, timeout: Duration) -> anyhow::Result<()>;
    /// Stop taking events, keeping what is in flight: the window ends here.
    fn stop(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
    /// Whether `finish` reads the traced processes (their last /proc
    /// counters), so runs before a `-- CMD` still running is stopped; a
    /// sampler that only names what it recorded finishes after, so the
    /// command's CPU (its rusage) is not charged kdiag's symbolizing.
    fn reads_target(&self) -> bool {
        true
    }
    /// Detach everything and put what was found into `report` (a profile's
    /// stacks, unit, event, losses, `collection` and `notes`: what the tier
    /// could not see).
    fn finish(self: Box<Self>, report: &mut R) -> anyhow::Result<F>;
}

/// A running trace whose result is a `Profile` (stacks weighted by what it
/// counts: `WeightUnit::Events` for a counting instrument).
pub type ProfileSource<F = ()> = dyn ReportSource<crate::model::profile::Profile, F>;

/// Open the tier asked for, from an instrument's `tiers` (best first).
/// `Auto` tries them in order and, when it had to fall back, says from
/// which tier and why (the first tier's error).
pub fn open<S: ?Sized>(
    ask: Ask,
    tiers: Vec<Opener<'_, S>>,
) -> anyhow::Result<(Box<S>, Option<Fallback>)> {
    let mut first: Option<(Tier, anyhow::Error)> = None;
    let mut last = None;
    for (tier, open) in tiers {
        if ask != Ask::Auto && ask != Ask::Only(tier) {
            continue;
        }
        match open() {
            Ok(source) => {
                let fallback = first.map(|(from, error)| Fallback {
                    from,
                    to: tier,
                    error,
                });
                return Ok((source, fallback));
            }
            Err(e) if ask == Ask::Auto => match first {
                None => first = Some((tier, e)),
                Some(_) => last = Some(e),
            },
            Err(e) => return Err(e),
        }
    }
    // Every tier failed: the last one's error says what is missing.
    Err(last
        .or(first.map(|(_, e)| e))
        .unwrap_or_else(|| anyhow::anyhow!("no such tier for this instrument")))
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
