//! What `kdiag watch` exports: per group of processes, counters that only
//! grow (thread seconds by state, faults, storage bytes) and the verdict of
//! the last interval; the machine's pressure; what watching costs.

use serde::{Deserialize, Serialize};

use crate::model::diagnosis::{Class, ThreadState};

/// The thread states watch exports, in the order of the exposition, with
/// their label values.
pub const STATES: [(ThreadState, &str); 8] = [
    (ThreadState::OnCpu, "on_cpu"),
    (ThreadState::RunQueue, "runqueue"),
    (ThreadState::Storage, "storage"),
    (ThreadState::Lock, "lock"),
    (ThreadState::Paging, "paging"),
    (ThreadState::Stopped, "stopped"),
    (ThreadState::Sleeping, "sleep"),
    (ThreadState::Other, "other"),
];

/// The index of a state in `STATES`.
pub fn state_index(s: ThreadState) -> usize {
    STATES
        .iter()
        .position(|(x, _)| *x == s)
        .unwrap_or(STATES.len() - 1)
}

/// One group (a process name or a cgroup), its counters summed since watch
/// started.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Group {
    pub name: String,
    pub processes: usize,
    pub threads: usize,
    /// Thread seconds per state, indexed as `STATES`.
    pub thread_seconds: [f64; 8],
    pub major_faults: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// The last interval's verdict; None before the first full interval.
    pub verdict: Option<Class>,
    /// Working thread-seconds of the last interval (what ranks the groups).
    pub working_s: f64,
    /// With --group-by cgroup, its cgroup's CFS bandwidth throttling as the
    /// kernel counts it (cpu.stat): seconds throttled and periods throttled.
    pub throttled_s: Option<f64>,
    pub throttled_periods: Option<u64>,
}

/// System pressure stall information, cumulative.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Pressure {
    /// "cpu", "io" or "memory".
    pub resource: String,
    /// Time some task waited ("some" line), seconds.
    pub waiting_s: f64,
    /// Time every non-idle task stalled at once ("full" line), seconds.
    pub stalled_s: Option<f64>,
}

/// What kdiag watch itself costs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Cost {
    pub cpu_s: f64,
    pub rss_bytes: u64,
    /// The last scan of /proc, seconds.
    pub scan_s: f64,
    pub processes: usize,
    pub samples_total: u64,
}

/// The flight records kept of one group with one verdict since watch
/// started (`kdiag_flight_records_total`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlightCount {
    pub group: String,
    pub verdict: Class,
    pub records: u64,
}

/// One exposition: the top groups, the machine's pressure, watch's cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Snapshot {
    pub groups: Vec<Group>,
    pub pressure: Vec<Pressure>,
    pub cost: Cost,
    pub interval_s: f64,
    /// Flight records taken, per group and verdict (with --flight-dir).
    pub flight: Vec<FlightCount>,
}
