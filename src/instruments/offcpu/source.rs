//! What both tiers of `kdiag offcpu` share: the options, the one trait
//! the command drives whichever tier runs, and what a finished run found.

use std::time::Duration;

use crate::instruments::Tier;
use crate::model::offcpu::{BlockCounts, Collection, StateFilter, WaitSamples};
use crate::model::profile::Profile;

/// What to record.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Watch only these processes (tgids) and, with `follow`, their
    /// children; empty: every task except the idle task.
    pub tgids: Vec<u32>,
    /// Watch the children the watched processes start.
    pub follow: bool,
    /// Blocks shorter than this are counted, not kept.
    pub min_block_ns: u64,
    pub states: StateFilter,
    /// Keep each thread's stacks apart (`Profile::threads`), with when each
    /// one's time was blocked (`Profile::times`: the BPF tier writes each
    /// block's end to a ring drained every 100 ms; the /proc tier keeps
    /// each sample's sweep, `WaitRow::times`).
    pub per_thread: bool,
    /// BPF tier: pair each sleep with the stack of the thread that woke it
    /// (`Stack::waker`).
    pub wakers: bool,
}

/// A running off-CPU trace, whatever its tier. Dropping it detaches
/// everything it attached.
pub trait OffcpuSource {
    /// The tier it runs on.
    fn tier(&self) -> Tier;
    /// Watch one more process: a `-- CMD` child, held before its exec,
    /// named `comm` until its exec renames it.
    fn watch(&mut self, tgid: u32, comm: &str) -> anyhow::Result<()>;
    /// Wait up to `timeout`, taking what the tier sees meanwhile.
    fn poll(&mut self, timeout: Duration) -> anyhow::Result<()>;
    /// Stop, detach everything and give what was found: the BPF tier's
    /// stacks go into `profile` (weights in ns blocked).
    fn finish(self: Box<Self>, profile: &mut Profile) -> anyhow::Result<Found>;
}

/// What a finished run found.
pub struct Found {
    /// The BPF tier's counters (zero for /proc).
    pub counts: BlockCounts,
    /// The /proc tier's samples.
    pub waits: Option<WaitSamples>,
    pub collection: Collection,
}
