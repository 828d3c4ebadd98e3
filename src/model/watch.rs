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
    /// With --group-by cgroup, who runs in the cgroup as its path says
    /// (a container, a pod's container, a systemd unit).
    pub runs_as: Option<RunsAs>,
}

/// Who runs in a cgroup, from its path (`analysis::runs_as`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunsAs {
    /// "Docker container", "container" (a Kubernetes pod's), "systemd
    /// service", ...
    pub what: String,
    /// The container id (12 characters, as `docker ps` shows it), the
    /// unit's name or the session's number.
    pub name: String,
    /// A Kubernetes pod's uid, when the path has one.
    pub pod: Option<String>,
}

impl RunsAs {
    /// A container of any runtime, whose name is its id.
    pub fn is_container(&self) -> bool {
        self.what.ends_with("container")
    }
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
    /// Groups are cgroups (--group-by cgroup), else process names.
    pub by_cgroup: bool,
    /// The process watched with --pid.
    pub pid: Option<i32>,
}

/// Something that happened to a group, which OTLP sends as a log record.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The group's verdict changed (`from` None: its first verdict).
    Verdict {
        group: String,
        from: Option<Class>,
        to: Class,
    },
    /// A flight record was kept: watch's verdict, the process diagnosed
    /// and diagnose's verdict, the record, its report and its profile.
    Flight {
        group: String,
        verdict: Class,
        pid: i32,
        found: Class,
        record: std::path::PathBuf,
        report: std::path::PathBuf,
        /// The drill-down's profile as pprof, when one ran.
        profile: Option<std::path::PathBuf>,
    },
}
