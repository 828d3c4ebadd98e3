//! What limits a watched tree from outside it, over diagnose's window: its
//! cgroups' CPU quota, I/O and memory limits and pids.max with what each
//! did (throttled periods, requests against the limit, failed charges,
//! refaults, OOM kills), the pressure (PSI) of the machine and of its v2
//! cgroup, and how busy the machine's CPUs were. Counters are the change
//! over the window; limits and usage are as read at its end.

use serde::{Deserialize, Serialize};

/// Everything outside the tree that bounds it. Empty in a record made
/// before kdiag read cgroups.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Each cgroup a member was in (its own, in every hierarchy) and each
    /// ancestor of it that sets a limit.
    pub cgroups: Vec<CgroupLimits>,
    /// The machine's pressure (/proc/pressure/*); None without PSI.
    pub pressure: Option<Pressure>,
    /// The machine's CPUs over the window (/proc/stat).
    pub cpus: Option<SystemCpus>,
}

/// One cgroup, and what it limits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CgroupLimits {
    /// 1 or 2.
    pub version: u8,
    /// A v1 hierarchy's controllers ("cpu,cpuacct"); empty for v2.
    pub controllers: String,
    /// Its path in the hierarchy ("/system.slice/nginx.service").
    pub path: String,
    /// Its directory here (where its files are).
    pub dir: String,
    /// The members seen in it (its own members, not an ancestor's).
    pub pids: Vec<i32>,
    /// Members of the tree in it, or under it (an ancestor).
    pub ancestor: bool,
    pub cpu: Option<CpuQuota>,
    pub io: Vec<IoLimit>,
    pub memory: Option<MemoryLimit>,
    pub pids_limit: Option<PidsLimit>,
    /// v2 only: the cgroup's own pressure.
    pub pressure: Option<Pressure>,
}

impl CgroupLimits {
    /// Where the limit is set, for the user: "v1 cpu /kdiag-x".
    pub fn name(&self) -> String {
        match self.version {
            1 => format!("v1 {} {}", self.controllers, self.path),
            _ => format!("v2 {}", self.path),
        }
    }
}

/// The CFS bandwidth limit and its throttling in the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CpuQuota {
    /// Microseconds of CPU per period; None when unlimited.
    pub quota_us: Option<u64>,
    pub period_us: u64,
    /// Periods that had runnable tasks, and those that ran out of quota.
    pub periods: u64,
    pub throttled: u64,
    /// Time its run queues spent throttled, summed over CPUs.
    pub throttled_s: f64,
}

impl CpuQuota {
    /// The quota in CPUs (0.2 = 20% of one CPU).
    pub fn cpus(&self) -> Option<f64> {
        self.quota_us
            .map(|q| q as f64 / self.period_us.max(1) as f64)
    }
}

/// An I/O limit on one device and what the cgroup did on it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IoLimit {
    /// "MAJ:MIN".
    pub device: String,
    /// The device's name ("vda"), when known.
    pub disk: Option<String>,
    pub read_iops: Option<u64>,
    pub write_iops: Option<u64>,
    pub read_bps: Option<u64>,
    pub write_bps: Option<u64>,
    /// Requests and bytes the cgroup sent to it in the window.
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// A memory limit and its effect in the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemoryLimit {
    /// v2 memory.max, v1 memory.limit_in_bytes; None when unlimited.
    pub max: Option<u64>,
    /// v2 memory.high (reclaim above it, no OOM).
    pub high: Option<u64>,
    /// Usage at the end (memory.current, memory.usage_in_bytes).
    pub current: u64,
    /// v1 memory.failcnt: charges that hit the limit.
    pub failcnt: u64,
    /// v2 memory.events: times over high, times at max (reclaim), OOMs,
    /// processes OOM-killed (v1: memory.oom_control's oom_kill).
    pub high_events: u64,
    pub max_events: u64,
    pub oom: u64,
    pub oom_kill: u64,
    /// Pages evicted and read again (memory.stat workingset_refault_*).
    pub refaults: u64,
}

/// pids.max and the processes counted against it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PidsLimit {
    pub max: u64,
    pub current: u64,
    /// v2 pids.events max: forks refused in the window.
    pub refused: u64,
}

/// Pressure stall information over the window: the share of the time some
/// (at least one) task, or all non-idle tasks (full), stalled on a resource.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Pressure {
    pub cpu: Option<Stall>,
    pub io: Option<Stall>,
    pub memory: Option<Stall>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Stall {
    pub some: f64,
    pub full: Option<f64>,
}

/// The machine's CPUs over the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SystemCpus {
    pub cpus: usize,
    /// CPUs' worth of idle time (idle and iowait) on average.
    pub idle: f64,
}
