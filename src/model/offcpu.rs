//! An off-CPU profile (`kdiag offcpu`): where threads blocked and for how
//! long. With BPF, symbolized stacks weighted by nanoseconds blocked (a
//! `Profile` in `WeightUnit::Nanoseconds`); without it, a coarse view of
//! wait channels and syscalls sampled from /proc, which has no stacks.

use serde::{Deserialize, Serialize};

use crate::model::profile::{OffState, Profile};

/// Which blocks to record, by the state the thread blocked in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum StateFilter {
    /// Every way of leaving the CPU: sleeping, uninterruptible, preempted, ...
    #[default]
    All,
    /// Uninterruptible (D) only: storage I/O, some kernel locks
    D,
    /// Interruptible sleep (S) only: locks, timers, pipes, sockets
    S,
}

impl StateFilter {
    pub fn keeps(self, state: OffState) -> bool {
        match self {
            StateFilter::All => true,
            StateFilter::D => state == OffState::D,
            StateFilter::S => state == OffState::S,
        }
    }
}

/// How the data was collected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Collection {
    /// A BPF program on the scheduler's switch tracepoint, attached as
    /// `attach` (`tp_btf` or `raw_tp`), aggregating in the kernel.
    Bpf { attach: String },
    /// /proc sampled every `interval_ms`: states, wait channels, syscalls.
    Proc { interval_ms: u64 },
}

/// The BPF tier's counters: what was recorded and what was lost.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BlockCounts {
    /// Blocks added to the aggregation (at least --min-block long).
    pub blocks: u64,
    /// Blocks shorter than --min-block: counted, not kept.
    pub short: u64,
    /// Blocks still going on when tracing ended, counted up to the end.
    pub in_progress: u64,
    /// Kernel stacks not stored: the stack map was full or two stacks
    /// hashed to one bucket. Their time is kept under `[kernel stack lost]`.
    pub kernel_stacks_lost: u64,
    /// The same for user stacks (`[user stack lost]`).
    pub user_stacks_lost: u64,
    /// User threads whose user stack could not be read (`[user stack unreadable]`).
    pub user_stacks_unreadable: u64,
    /// Blocks not timed: too many watched threads were off the CPU at once.
    pub starts_dropped: u64,
    /// Blocks dropped: the aggregation table was full.
    pub table_full: u64,
    /// Of `blocks`, sleeps paired with the thread that woke them (wakers on).
    pub woken: u64,
    /// Blocks whose end the ring had no room for (per-thread runs, which
    /// place each block in time): their time is in the totals, not in time.
    pub ends_lost: u64,
}

impl BlockCounts {
    /// Stacks lost either way (the "N stacks lost" of the report).
    pub fn stacks_lost(&self) -> u64 {
        self.kernel_stacks_lost + self.user_stacks_lost
    }
}

/// One row of the coarse /proc view: how often threads of `comm` were
/// found in `state`, in syscall `syscall`, waiting in `wchan`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WaitRow {
    pub comm: String,
    pub state: OffState,
    /// The kernel function the thread sleeps in (/proc/TID/wchan), or empty.
    pub wchan: String,
    /// The system call it is in (/proc/TID/syscall), `-` outside one, or
    /// empty when unreadable.
    pub syscall: String,
    /// Times a sweep found a thread like this.
    pub samples: u64,
    /// Estimated time: the sweep intervals those samples stand for.
    pub est_ns: u64,
    /// When asked for (`Options::per_thread`): each sample's (CLOCK_MONOTONIC
    /// ns of its sweep, ns it stands for), for `profile --wall`'s heat map.
    #[serde(skip)]
    pub times: Vec<(u64, u64)>,
}

/// The coarse view: every sweep of /proc, aggregated.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WaitSamples {
    /// Sweeps over the target's threads.
    pub sweeps: u64,
    /// Threads found off the CPU, summed over sweeps.
    pub samples: u64,
    /// By estimated time, largest first.
    pub rows: Vec<WaitRow>,
}

/// A finished off-CPU run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offcpu {
    /// Stacks weighted by blocked time (empty for the /proc tier), with the
    /// target, start time, unknown-frame reasons and probe cost.
    pub profile: Profile,
    pub collection: Collection,
    /// Why the BPF tier was not used, when it was not.
    pub fallback_reason: Option<String>,
    pub states: StateFilter,
    pub min_block_us: u64,
    pub counts: BlockCounts,
    /// The /proc tier's samples.
    pub waits: Option<WaitSamples>,
}

/// Blocked time in one state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateShare {
    pub state: OffState,
    pub ns: u64,
    pub blocks: u64,
    pub percent: f64,
}

/// Blocked time under one kernel function.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitPoint {
    pub function: String,
    pub state: OffState,
    pub ns: u64,
    pub blocks: u64,
    pub percent: f64,
}

/// One distinct stack in one state, summed over the threads that blocked
/// in it: the code path is what matters, whichever worker took it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockingPath {
    /// The threads' names, most blocked first.
    pub comms: Vec<String>,
    pub state: OffState,
    /// Outermost first; kernel frames end in `_[k]`.
    pub frames: Vec<String>,
    pub ns: u64,
    pub blocks: u64,
    pub percent: f64,
}

/// The summary the report prints (`analysis::offcpu::summarize`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub total_ns: u64,
    pub blocks: u64,
    pub by_state: Vec<StateShare>,
    pub wait_points: Vec<WaitPoint>,
    pub paths: Vec<BlockingPath>,
}
