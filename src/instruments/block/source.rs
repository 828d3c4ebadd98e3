//! What both block tiers share: what to trace, and the source trait they
//! both implement.

use crate::instruments::Source;
use crate::model::block::{BlockIo, DevId, LatencyCount};

/// What to trace.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Only this device (filtered in the kernel).
    pub dev: Option<DevId>,
    /// -Q: latency counted from queue insertion.
    pub queued: bool,
    /// --hist: aggregate latencies in the kernel, emit no events.
    pub hist_only: bool,
    /// Only requests charged to a task of this real uid (filtered in the
    /// kernel: the BPF tier only).
    pub uid: Option<u32>,
}

/// A running block trace, on either tier.
pub trait BlockSource: Source<Event = BlockIo> {
    /// The latency histogram the kernel kept, on tiers that keep one.
    fn hist(&self) -> anyhow::Result<Option<Vec<LatencyCount>>> {
        Ok(None)
    }
    /// Completions the kernel had that never reached kdiag (after `finish`),
    /// beside records lost to a full ring: their requests are missing, and
    /// `notes` says why. The tests account for them instead of re-running.
    fn unseen(&self) -> u64 {
        0
    }
}
