//! `kdiag syscalls`: a process's system calls by name. The BPF tier counts
//! and times every call; the /proc tier only sees which call each thread is
//! blocked in when sampled, so it counts samples and has no times.

use serde::Serialize;

use crate::model::capability::Tier;
use crate::model::profile::ProbeCost;

/// One system call's line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Call {
    /// Its number on this architecture.
    pub nr: i64,
    /// Its name, or `syscall N` when the table has none.
    pub name: String,
    /// Calls made (BPF), or samples that saw a thread blocked in it (/proc).
    pub count: u64,
    /// Calls that returned an error (BPF).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<u64>,
    /// Time spent in it, summed over threads (BPF).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_ns: Option<u64>,
    /// Calls timed (BPF): returned, or in progress at the end; not
    /// exit, exit_group, nor a call its thread ended in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timed: Option<u64>,
    /// The longest single call (BPF).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ns: Option<u64>,
    /// Calls still in progress at the end, timed up to it (BPF).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_progress: Option<u64>,
}

/// A finished `kdiag syscalls` run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Syscalls {
    pub target: String,
    /// UTC, ISO 8601.
    pub started: String,
    pub tier: Option<Tier>,
    /// What `Call::count` counts: `calls` (BPF) or `samples` (/proc).
    pub counts: String,
    /// Most time first (BPF), else most counted.
    pub calls: Vec<Call>,
    /// Calls or samples not in `calls`: numbers out of the table's range
    /// (BPF), or threads seen running rather than blocked (/proc).
    pub other: u64,
    /// Calls counted without their time (the table of calls in progress
    /// was full).
    pub untimed: u64,
    /// How the data was collected, for the report's Tier line.
    pub collection: String,
    /// What the tier could not see, and any fallback.
    pub notes: Vec<String>,
    /// Why tracing ended before its duration, if it did.
    pub ended_early: Option<String>,
    pub cost: ProbeCost,
}

impl Syscalls {
    /// Put the lines in the report's order: most time, else most counted,
    /// then by name.
    pub fn sort(&mut self) {
        self.calls.sort_by(|a, b| {
            (b.total_ns, b.count)
                .cmp(&(a.total_ns, a.count))
                .then_with(|| a.name.cmp(&b.name))
        });
    }
}
