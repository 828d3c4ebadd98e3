//! A verdict as data (`Diagnosis`): what it rests on (`Cause`) and each
//! line of its evidence (`Finding`), with the numbers and the limits,
//! locks, stalls and cgroups they name as typed fields. No English here:
//! the words are made in one place, `render::verdict`, so a change of
//! wording changes neither the JSON nor the record format (docs/diagnose.md,
//! JSON version 3).

use serde::{Deserialize, Serialize};

use crate::model::diagnosis::{
    Carrier, Class, Confidence, Ended, FaultReads, JvmHeap, KernelThread, LockWaits, MemberShare,
    MemoryPoint, Periodic, StateShare, Stopped, ThreadState,
};
use crate::model::limits::{CpuQuota, MemoryLimit, PidsLimit, Pressure, SystemCpus};
use crate::model::process::SmapsRollup;
use crate::model::stalls::Stall;

/// A verdict with the numbers behind it and what to run next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    pub verdict: Class,
    pub confidence: Confidence,
    /// What the verdict rests on, as data (`render::verdict` words it).
    pub cause: Cause,
    /// The thread-state breakdown, largest first.
    pub states: Vec<StateShare>,
    /// Threads working (not sleeping by design) on average; in bursts
    /// when the work comes in bursts.
    pub working_threads: f64,
    pub periodic: Option<Periodic>,
    /// The members with most of the tree's CPU (with more than one member).
    pub busiest: Vec<MemberShare>,
    /// The members in the verdict's state (storage for `io`, blocked for
    /// `lock`, on CPU for `cpu`), most first: what the drill-downs trace.
    #[serde(default)]
    pub carriers: Vec<Carrier>,
    /// The evidence, one finding per line of the report, as data.
    pub findings: Vec<Finding>,
    /// The instrument to run for the "why", as a command line.
    pub next: Vec<String>,
    /// What each time series did.
    pub trend: crate::model::trend::Shapes,
}

/// Something named and its share: a wait point ("mutex (futex)"), a
/// kernel function, a system call with its kernel function.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    pub what: String,
    /// Of the samples it was counted among (0 to 1).
    pub share: f64,
}

/// A thread state and its share (of the working time in a cause, of the
/// thread time in the evidence).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatePart {
    pub state: ThreadState,
    pub share: f64,
}

/// A cgroup as the user names it: its hierarchy and path.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cgroup {
    /// 1 or 2.
    pub version: u8,
    /// A v1 hierarchy's controllers ("cpu,cpuacct"); empty for v2.
    pub controllers: String,
    pub path: String,
}

/// A process by its PID and name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Process {
    pub pid: i32,
    pub comm: String,
}

/// The lock blocked threads waited for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "seen", rename_all = "kebab-case")]
pub enum LockSeen {
    /// A contended mutex at one address (the futex convention).
    Mutex(LockWaits),
    /// A runtime's lock the waiters' user stacks named (the GIL, a monitor).
    Runtime {
        /// "CPython", "JVM", "glibc".
        runtime: String,
        /// "the GIL", "a monitor (synchronized)".
        kind: String,
        /// The function that takes it, and the named one that called it.
        function: String,
        caller: Option<String>,
        /// Share of the thread time spent waiting for it.
        share: f64,
    },
}

/// A JVM whose CPU went to its garbage collector, with the old generation
/// full: it collects at its heap limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GcAtLimit {
    /// The collectors' time, of the window.
    pub gc_share: f64,
    pub heap: JvmHeap,
    pub window_s: f64,
}

/// The I/O limit a cgroup came closest to on one device, in the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoAgainst {
    /// "read-iops", "write-iops", "read-bps" or "write-bps".
    pub limit: IoLimitKind,
    /// Per second, in the limit's unit (requests or bytes).
    pub rate: f64,
    pub max: u64,
    /// rate / max.
    pub used: f64,
}

/// Which of a device's four I/O limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IoLimitKind {
    ReadIops,
    WriteIops,
    ReadBps,
    WriteBps,
}

/// A device an I/O limit is set on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Device {
    /// "MAJ:MIN".
    pub device: String,
    /// Its name ("vda"), when known.
    pub disk: Option<String>,
}

/// The limit a check looked for and did not find on the target's cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LimitKind {
    CpuQuota,
    IoLimit,
}

/// What the verdict rests on, with its numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Cause {
    /// Exited, not reaped by its parent.
    Zombie { parent: Process },
    /// Stopped this share of its thread time (1 when no time was seen).
    Stopped {
        share: f64,
        stopped: Option<Stopped>,
        also: Vec<StatePart>,
    },
    /// Anonymous memory growing steadily (KiB per second, after a warm-up).
    MemoryTrend { slope_kib_s: f64, warm_up_s: f64 },
    /// Few threads working: how many, the CPUs used, where it sleeps.
    Idle {
        working: f64,
        cpus: f64,
        sleeping: Vec<Part>,
    },
    /// No working state was measured at all.
    Nothing,
    /// On CPU `share` of the working time, `cpus` CPUs, mostly in the
    /// kernel or in user space.
    Cpu {
        share: f64,
        cpus: f64,
        kernel: bool,
        also: Vec<StatePart>,
        /// Of the CPU, the share of children too short-lived to see (each
        /// under a scan): a fork storm when it is most of it.
        #[serde(default)]
        children: f64,
        /// A JVM collecting at its heap limit, when that is where it went.
        #[serde(default)]
        gc: Option<GcAtLimit>,
    },
    /// `queue_share` of the runnable time in the run queue; CPUs used and
    /// CPUs' worth waited for.
    Sched {
        queue_share: f64,
        cpus: f64,
        waited: f64,
        also: Vec<StatePart>,
    },
    /// Waiting for storage `share` of the working time, in these waits.
    Io {
        share: f64,
        waits: Vec<Part>,
        also: Vec<StatePart>,
    },
    /// Waiting for a lock `share` of the working time.
    Lock {
        share: f64,
        lock: Option<LockSeen>,
        also: Vec<StatePart>,
        /// The lock is one of tasks a runtime runs on few threads (Go's
        /// goroutines): its threads park only when no task can run, so
        /// `share` is the parallelism it cost, not every waiter's time.
        #[serde(default)]
        multiplexed: bool,
    },
    /// Waiting for swap-in `share` of the working time.
    Paging { share: f64, also: Vec<StatePart> },
    /// Blocked in the kernel `share` of the working time, in these functions.
    Blocked {
        share: f64,
        wchans: Vec<Part>,
        also: Vec<StatePart>,
    },
    /// The OOM killer killed `kills` processes of this memory cgroup; the
    /// tree's members that ended under it.
    OomKill {
        kills: u64,
        cgroup: Cgroup,
        max: Option<u64>,
        ended: Vec<Process>,
    },
    /// Throttled by a CPU quota; CPUs used and CPUs' worth waited for it.
    CpuQuota {
        cgroup: Cgroup,
        quota: CpuQuota,
        used: f64,
        waited: f64,
    },
    /// The thread states' `sched`, but CPUs stood idle (or CPU pressure was
    /// low) and no quota throttled it: not competition.
    NotCompetition {
        states: Box<Cause>,
        /// Set when CPUs stood idle; else the pressure (PSI some) was low.
        idle: Option<SystemCpus>,
        pressure: Option<f64>,
        /// The cgroups read (none: it is in no cgroup but the root).
        read: Vec<Cgroup>,
    },
    /// Storage waits at its cgroup's I/O limit.
    IoLimit {
        cgroup: Cgroup,
        device: Device,
        against: IoAgainst,
    },
    /// Reclaim under its cgroup's memory limit: pages evicted and read
    /// again in the window.
    MemoryLimit {
        cgroup: Cgroup,
        limit: MemoryLimit,
        window_s: f64,
    },
    /// A thread stuck in one call the whole window while work waited.
    Stall { stall: Stall, window_s: f64 },
    /// Forks refused at its cgroup's pids.max, `limit.refused` of them in
    /// `window_s`.
    PidsLimit {
        cgroup: Cgroup,
        limit: PidsLimit,
        window_s: f64,
    },
    /// Its execs fail: `failed` of `execs`; the first failure `times` times,
    /// the last as `pid`; `what` is exec-trace's name of the failure.
    Exec {
        failed: u64,
        execs: u64,
        times: u64,
        pid: u32,
        what: String,
    },
}

/// One line of evidence, with its numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Finding {
    /// What the thread states alone said, when another verdict replaced
    /// theirs (`periodic` set when that verdict's sentence had it).
    StatesAlone {
        verdict: Class,
        cause: Box<Cause>,
        periodic: Option<Periodic>,
    },
    /// Its exit status waits for its parent.
    Zombie { parent: Process },
    /// A kernel thread: what it is and who drives it.
    KernelThread { thread: KernelThread },
    /// The target ended in the window.
    Ended(Ended),
    /// The thread time by state (of all of it), its seconds, and the
    /// threads working on average.
    ThreadTime {
        states: Vec<StatePart>,
        thread_s: f64,
        working: f64,
    },
    /// CPU used over the window.
    Cpu {
        user_s: f64,
        system_s: f64,
        /// Of the whole tree, unseen children included.
        cpu_s: f64,
        window_s: f64,
        threads: usize,
        processes: usize,
    },
    /// Run-queue delay (None: no schedstats) against the CPU time.
    RunQueue { delay_s: Option<f64>, cpu_s: f64 },
    /// Storage bytes and faults per second; block-I/O delay when measured.
    Storage {
        read_per_s: f64,
        written_per_s: f64,
        major_per_s: f64,
        minor_per_s: f64,
        blkio_delay_s: Option<f64>,
    },
    /// Where one state's samples waited; `of` is that state's share of the
    /// thread time.
    Waits {
        state: ThreadState,
        of: f64,
        waits: Vec<Part>,
    },
    /// Off-CPU samples by system call and kernel function.
    BlockedIn { waits: Vec<Part> },
    /// The lock threads waited for.
    Lock { lock: LockSeen },
    /// A member seen stopped.
    Stopped(Stopped),
    /// Memory at both ends of the window.
    Memory {
        first: MemoryPoint,
        last: MemoryPoint,
        /// The mappings at the end.
        end: Option<SmapsRollup>,
        trend: Option<MemoryGrowth>,
    },
    /// Memory could not be read.
    MemoryUnread,
    /// Bursts of work.
    Periodic(Periodic),
    /// The tree's busiest members, and CPU of children too short-lived to see.
    Tree {
        busiest: Vec<MemberShare>,
        unseen_children_cpu_s: f64,
    },
    /// The threads' syscall files were unreadable.
    SyscallsUnreadable,
    /// Storage time is estimated from samples (no delay accounting).
    StorageEstimated,
    /// Storage read in page faults (a file read through mmap): the kernel
    /// time handling them counted as storage, over a window of `window_s`.
    FaultReads { reads: FaultReads, window_s: f64 },
    /// A CPU quota on one of its cgroups, and its throttling.
    CpuQuota { cgroup: Cgroup, quota: CpuQuota },
    /// An I/O limit on one of its cgroups, and how near it came.
    IoLimit {
        cgroup: Cgroup,
        device: Device,
        against: Option<IoAgainst>,
    },
    /// A memory limit on one of its cgroups, and what it did.
    MemoryLimit { cgroup: Cgroup, limit: MemoryLimit },
    /// pids.max on one of its cgroups.
    PidsLimit { cgroup: Cgroup, limit: PidsLimit },
    /// A JVM's collector and heap over the window.
    JvmHeap {
        heap: JvmHeap,
        cpu_s: f64,
        window_s: f64,
    },
    /// Who it runs as, from its cgroup's path.
    RunsAs {
        /// "Docker container", "systemd service", ...
        what: String,
        /// The container id, unit name or session number.
        name: String,
        pod: Option<String>,
        path: String,
    },
    /// A limit looked for and not found on its cgroups (`read`: those
    /// read; none: it is in no cgroup but the root).
    NoLimit { limit: LimitKind, read: Vec<Cgroup> },
    /// Pressure (PSI) of the machine, or of its cgroup at `cgroup`.
    Pressure {
        cgroup: Option<String>,
        pressure: Pressure,
    },
    /// The machine's CPUs and how idle they stood.
    Cpus(SystemCpus),
    /// A thread that never ran in the window while work waited.
    Stalled { stall: Stall, window_s: f64 },
    /// The members carrying the verdict (the drill-downs trace them).
    Carriers {
        verdict: Class,
        carriers: Vec<Carrier>,
    },
}

/// Anonymous memory's growth after its warm-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryGrowth {
    pub warm_up_s: f64,
    pub slope_kib_s: f64,
    /// One step rather than a steady growth.
    pub step: bool,
}
