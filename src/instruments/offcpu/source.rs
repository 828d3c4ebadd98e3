//! What both tiers of `kdiag offcpu` share: the options, and what a
//! finished run found beside its profile (both tiers are an
//! `instruments::ProfileSource<Found>`).

use crate::model::offcpu::{BlockCounts, Collection, StateFilter, WaitSamples};

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

/// What a finished run found.
pub struct Found {
    /// The BPF tier's counters (zero for /proc).
    pub counts: BlockCounts,
    /// The /proc tier's samples.
    pub waits: Option<WaitSamples>,
    pub collection: Collection,
}
