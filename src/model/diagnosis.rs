//! What `kdiag diagnose` watched (an `Observation` of a process, or of a
//! process tree, over a window), and the pieces of what it concluded (the
//! `Diagnosis` itself is in `model::verdict`).
//! Serialised as JSON version `SCHEMA_VERSION` (docs/diagnose.md).

use serde::{Deserialize, Serialize};

use crate::model::drill::Drill;
use crate::model::process::SmapsRollup;

/// Version of the JSON document `kdiag diagnose --json` prints. Raised on
/// any change that removes or renames a field or changes its meaning.
/// Version 4 moved `diagnosis.fault_reads` into `findings[]`.
pub const SCHEMA_VERSION: u32 = 4;

/// The verdict. `cpu`, `io`, `lock` and `memory-trend` match the
/// `expect.class` the bundled workloads print with `--describe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// On a CPU most of its working time.
    Cpu,
    /// Runnable, but waiting for a CPU a large share of that time.
    Sched,
    /// Waiting for storage (block I/O, page faults on files, fsync).
    Io,
    /// Waiting for a lock another thread holds.
    Lock,
    /// Waiting for pages to come back from swap.
    Paging,
    /// Off CPU in a kernel wait diagnose cannot name a cause for.
    Blocked,
    /// Stopped by a signal or a tracer.
    Stopped,
    /// Anonymous memory growing steadily.
    MemoryTrend,
    /// Mostly sleeping by design (timers, waiting for input or events).
    Idle,
    /// Exited, but its parent has not collected its exit status.
    Zombie,
    /// What it starts cannot run: its execs (or its children's) fail.
    Exec,
    /// Waiting for its cgroup's CPU quota (CFS bandwidth), not for a CPU.
    CpuQuota,
    /// Its storage waits are its cgroup's I/O limit, not the device.
    IoLimit,
    /// Reclaim under its cgroup's memory limit: what it reads is evicted
    /// and read again.
    MemoryLimit,
    /// The OOM killer killed processes of its memory cgroup.
    OomKill,
    /// A thread stuck in one call the whole window while work waits for
    /// it (connections queued, bytes unread, threads on its lock).
    Stall,
    /// Its forks are refused: its cgroup's pids.max is reached.
    PidsLimit,
}

impl Class {
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Its row of the table of what diagnose knows of each class; a new
    /// class is its row here and its words in render/verdict.rs.
    pub fn spec(self) -> &'static ClassSpec {
        match self {
            Class::Cpu => &ClassSpec {
                name: "cpu",
                record: false,
                weight: Weight::Cpu,
                drills: &[Drill::Cpu],
                next: Next::Drill(Drill::Cpu),
                kept: false,
            },
            Class::Sched => &ClassSpec {
                name: "sched",
                record: true,
                weight: Weight::RunDelay,
                drills: &[Drill::Sched],
                next: Next::Competition,
                kept: false,
            },
            // Waiting for storage: where it blocks, and what it asks of
            // the disk.
            Class::Io => &ClassSpec {
                name: "io",
                record: true,
                weight: Weight::States(&[ThreadState::Storage]),
                drills: &[Drill::Offcpu, Drill::Storage],
                next: Next::Drill(Drill::Storage),
                kept: false,
            },
            Class::Lock => &ClassSpec {
                name: "lock",
                record: true,
                weight: Weight::States(&[ThreadState::Lock]),
                drills: &[Drill::Offcpu],
                next: Next::Threads,
                kept: false,
            },
            // Waiting for pages from swap: as for storage.
            Class::Paging => &ClassSpec {
                name: "paging",
                record: false,
                weight: Weight::States(&[ThreadState::Paging]),
                drills: &[Drill::Offcpu, Drill::Storage],
                next: Next::Drill(Drill::Storage),
                kept: false,
            },
            // Anything else the kernel makes it wait for: where it waits.
            Class::Blocked => &ClassSpec {
                name: "blocked",
                record: false,
                weight: Weight::States(&[ThreadState::Other]),
                drills: &[Drill::Offcpu],
                next: Next::Threads,
                kept: false,
            },
            Class::Stopped => &ClassSpec {
                name: "stopped",
                record: false,
                weight: Weight::States(&[ThreadState::Stopped]),
                drills: &[],
                next: Next::Continue,
                kept: true,
            },
            Class::MemoryTrend => &ClassSpec {
                name: "memory-trend",
                record: true,
                weight: Weight::States(&[]),
                drills: &[],
                next: Next::Threads,
                kept: false,
            },
            // Sleeping by design: where it sleeps.
            Class::Idle => &ClassSpec {
                name: "idle",
                record: false,
                weight: Weight::States(&[ThreadState::Sleeping]),
                drills: &[Drill::Offcpu],
                next: Next::Nothing,
                kept: false,
            },
            Class::Zombie => &ClassSpec {
                name: "zombie",
                record: false,
                weight: Weight::States(&[]),
                drills: &[],
                next: Next::Parent,
                kept: true,
            },
            // Exec tracing runs during the whole watch, not after it.
            Class::Exec => &ClassSpec {
                name: "exec",
                record: false,
                weight: Weight::States(&[]),
                drills: &[],
                next: Next::Drill(Drill::Exec),
                kept: false,
            },
            // What it spends its quota on.
            Class::CpuQuota => &ClassSpec {
                name: "cpu-quota",
                record: true,
                weight: Weight::Cpu,
                drills: &[Drill::Cpu],
                next: Next::Found,
                kept: false,
            },
            // Where the limit makes it wait, and what it asks of the disk.
            Class::IoLimit => &ClassSpec {
                name: "io-limit",
                record: true,
                weight: Weight::States(&[ThreadState::Storage]),
                drills: &[Drill::Offcpu, Drill::Storage],
                next: Next::Found,
                kept: false,
            },
            // Evicted pages read again: file pages are storage waits,
            // anonymous ones paging.
            Class::MemoryLimit => &ClassSpec {
                name: "memory-limit",
                record: true,
                weight: Weight::States(&[ThreadState::Storage, ThreadState::Paging]),
                drills: &[Drill::Offcpu, Drill::Storage],
                next: Next::Found,
                kept: false,
            },
            Class::OomKill => &ClassSpec {
                name: "oom-kill",
                record: true,
                weight: Weight::States(&[]),
                drills: &[],
                next: Next::Found,
                kept: false,
            },
            // The stuck thread sleeps, or blocks.
            Class::Stall => &ClassSpec {
                name: "stall",
                record: true,
                weight: Weight::States(&[ThreadState::Sleeping, ThreadState::Other]),
                drills: &[Drill::Offcpu],
                next: Next::Found,
                kept: false,
            },
            Class::PidsLimit => &ClassSpec {
                name: "pids-limit",
                record: false,
                weight: Weight::States(&[]),
                drills: &[],
                next: Next::Found,
                kept: false,
            },
        }
    }
}

/// What diagnose and watch know of a verdict class (its words aside).
#[derive(Debug, PartialEq)]
pub struct ClassSpec {
    /// Its name in reports, JSON and metrics (serde's kebab-case).
    pub name: &'static str,
    /// A watch sample of it is worth a flight record: the group waits on
    /// something other than its own work (storage, a lock, the CPUs, its
    /// cgroup's limits, a stalled call) or grows its memory.
    pub record: bool,
    /// A member's part in it: what makes a member of a tree its carrier.
    pub weight: Weight,
    /// The drill-downs run after it (`analysis::why::plan`).
    pub drills: &'static [Drill],
    /// What it suggests running next, on its carrier.
    pub next: Next,
    /// A state the process is in, not where its work goes: nothing found
    /// after the thread states (a limit, failed execs) replaces it, and it
    /// tells no bursts.
    pub kept: bool,
}

/// A member's part in a verdict (`analysis::carriers`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Weight {
    /// Its CPU seconds.
    Cpu,
    /// Its run-queue delay (CPU seconds without schedstats).
    RunDelay,
    /// Its thread samples in these states (none: no member carries it).
    States(&'static [ThreadState]),
}

/// What a verdict suggests running next (`analysis::classify` writes the
/// commands).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    /// Nothing: it waits by design.
    Nothing,
    /// What the finding that made the verdict names (a limit, a stall).
    Found,
    /// This drill-down by hand.
    Drill(Drill),
    /// Who else has the CPUs, and every process's CPU profile.
    Competition,
    /// Its threads live (top), and its CPU profile.
    Threads,
    /// Let it continue, unless a tracer stopped it.
    Continue,
    /// Diagnose the parent that does not reap it.
    Parent,
}

/// Where a thread's time goes (Brendan Gregg's thread-state analysis).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThreadState {
    /// Running on a CPU (user or kernel).
    OnCpu,
    /// Runnable, waiting in a run queue for a CPU.
    RunQueue,
    /// Blocked on storage: block I/O, faults on file pages, fsync, async I/O.
    Storage,
    /// Blocked on a lock: a contended mutex (futex), a file or kernel lock.
    Lock,
    /// Blocked on a fault that reads from swap.
    Paging,
    /// Stopped (SIGSTOP, SIGTSTP, a tracer).
    Stopped,
    /// Sleeping by design: timers, waiting for input, events, children,
    /// signals or a condition.
    Sleeping,
    /// Off CPU elsewhere.
    Other,
}

impl ThreadState {
    pub fn describe(self) -> &'static str {
        match self {
            ThreadState::OnCpu => "on CPU",
            ThreadState::RunQueue => "waiting for a CPU",
            ThreadState::Storage => "waiting for storage",
            ThreadState::Lock => "waiting for a lock",
            ThreadState::Paging => "waiting for swap-in",
            ThreadState::Stopped => "stopped",
            ThreadState::Sleeping => "sleeping by design",
            ThreadState::Other => "blocked elsewhere",
        }
    }
}

/// How the target was chosen, and so what the observation covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// One process (`-p PID`).
    #[default]
    Process,
    /// A process and every descendant (`-p PID --tree`).
    Tree,
    /// A command kdiag started and everything it started (`-- CMD`).
    Command,
    /// Every process of a cgroup and what they start (`--cgroup`, `--unit`).
    Cgroup,
}

/// One process (or a process tree) over a window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Observation {
    pub pid: i32,
    pub comm: String,
    pub scope: Scope,
    /// The cgroup watched (scope `cgroup`), as its directory here.
    pub cgroup: Option<String>,
    pub window_s: f64,
    pub members: Vec<Member>,
    /// Sums over the members.
    pub totals: Totals,
    /// Thread samples by where the thread was (state, wait point).
    pub samples: Vec<ThreadSamples>,
    pub sampling: Sampling,
    /// Working threads over time, one bucket every `bucket_s`.
    pub busy: Vec<f64>,
    pub bucket_s: f64,
    /// Futex addresses threads waited on as on a contended mutex.
    pub locks: Vec<LockWaits>,
    /// What blocked threads waited in, by their user stacks (a runtime's
    /// lock, a condition): read after the verdict when threads waited on
    /// futexes or semaphores.
    pub runtime_locks: Vec<crate::model::locks::RuntimeLock>,
    pub memory: Memory,
    /// Set when the target itself is a zombie.
    pub zombie: Option<Zombie>,
    /// Set when a member was seen stopped.
    pub stopped: Option<Stopped>,
    /// Set when the target is a kernel thread.
    pub kernel_thread: Option<KernelThread>,
    /// Set when the target (every member of the tree) ended in the window.
    pub ended: Option<Ended>,
    /// kernel.task_delayacct was on (storage delay is then measured, not
    /// estimated from samples).
    pub delay_accounting: bool,
    /// The threads' syscall files could be read (they need ptrace access);
    /// without them wait points come from kernel function names only.
    pub syscalls_readable: bool,
    /// What watching cost kdiag itself.
    pub cost: Cost,
    /// The time series, one point per interval.
    pub trend: crate::model::trend::Trend,
    /// What limits it from outside: cgroups, pressure, the machine's CPUs.
    pub limits: crate::model::limits::Limits,
    /// Threads that never ran in the window while work waited for their
    /// process.
    pub stalls: Vec<crate::model::stalls::Stall>,
    /// A JVM's heap and collector over the window (its perf data, its
    /// flags); None for any other process.
    pub jvm: Option<JvmHeap>,
}

/// A JVM's heap limit and its garbage collector over the window, from its
/// hsperfdata file (the sun.gc.* counters jstat reads) and its -Xmx flag.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct JvmHeap {
    /// -Xmx from its command line, in bytes.
    pub xmx: Option<u64>,
    /// The heap's largest size: its generations' maximum capacities summed
    /// (0 without perf data).
    pub max_bytes: u64,
    /// The old generation at the end: used, and its maximum capacity.
    pub old_used: u64,
    pub old_max: u64,
    /// Collectors' time in the window (seconds), collections, and those of
    /// the old generation's collector (full collections).
    pub gc_s: f64,
    pub collections: u64,
    pub full: u64,
    /// The collectors' names ("Copy", "MSC"; "G1 young", "G1 full").
    pub collectors: Vec<String>,
}

/// One process of the tree.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Member {
    pub pid: i32,
    pub ppid: i32,
    pub comm: String,
    /// Started during the window (its counters count from zero).
    pub started: bool,
    /// Ended (exited, or a zombie) during the window.
    pub ended: bool,
    pub user_s: f64,
    pub system_s: f64,
    /// Run-queue delay of its threads; None without schedstats.
    pub run_delay_s: Option<f64>,
    /// Most threads seen at once.
    pub threads: usize,
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    pub minor_faults: u64,
    pub major_faults: u64,
    /// Its threads' samples by state (`analysis::carriers` picks the
    /// members a verdict's drill-downs look at).
    pub states: std::collections::BTreeMap<ThreadState, u64>,
}

/// Counter deltas summed over the tree.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Totals {
    pub user_s: f64,
    pub system_s: f64,
    /// CPU time of children the members reaped that diagnose never saw
    /// (shorter-lived than its 100 ms scan).
    pub unseen_children_cpu_s: f64,
    /// Time threads waited runnable for a CPU (schedstat run_delay); None
    /// when the kernel keeps no schedstats.
    pub run_delay_s: Option<f64>,
    /// Time threads waited for block I/O (delay accounting); None when off.
    pub blkio_delay_s: Option<f64>,
    /// Seconds of thread lifetime in the window, summed over threads: the
    /// budget the thread states share.
    pub thread_s: f64,
    /// Most threads (of all members) seen at once.
    pub threads: usize,
    pub processes: usize,
    /// Storage bytes (/proc/PID/io); None when not readable.
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    pub minor_faults: u64,
    pub major_faults: u64,
}

/// How often threads were seen in one state, waiting in one place.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ThreadSamples {
    /// R, S, D, T, t, ...
    pub state: char,
    /// The kernel function a sleeping thread waits in (/proc/TID/wchan);
    /// empty for a running one.
    pub wchan: String,
    /// The system call it is blocked in ("futex", "read", ...), "fault"
    /// when blocked outside one (a page fault), "#N" for an unnamed call;
    /// empty when running or unreadable.
    pub syscall: String,
    /// What it waits on: the kind of file behind the descriptor ("pipe",
    /// "socket", "file", ...), "mutex" for a futex in the contended-mutex
    /// convention, "futex" for another futex wait; empty when unknown.
    pub on: String,
    pub count: u64,
}

/// How the sampling went.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Sampling {
    pub interval_ms: u64,
    /// At most this many threads are sampled per tick, in rotation.
    pub threads_per_tick: usize,
    pub ticks: u64,
    pub samples: u64,
}

/// Threads waiting on one futex address in the contended-mutex convention.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LockWaits {
    pub pid: i32,
    pub address: String,
    pub samples: u64,
    /// Distinct threads seen waiting on it.
    pub waiters: usize,
    /// Most threads seen waiting on it in one tick.
    pub most_at_once: usize,
    /// Share of the moments with waiters when another thread of the same
    /// process was running: high when the holder works under the lock.
    pub running_share: f64,
}

/// Memory of the tree: a series of its RSS by kind, and the mappings'
/// summary at both ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Memory {
    pub series: Vec<MemoryPoint>,
    pub start: Option<SmapsRollup>,
    pub end: Option<SmapsRollup>,
}

/// RSS by kind at one moment (KiB, summed over the tree).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemoryPoint {
    /// Seconds since the start of the window.
    pub t: f64,
    pub anon_kib: u64,
    pub file_kib: u64,
    pub shmem_kib: u64,
    pub swap_kib: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Zombie {
    pub parent_pid: i32,
    pub parent_comm: String,
}

/// Stopped members: by a tracer (ptrace) or by a signal.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Stopped {
    pub pid: i32,
    /// The tracer, when one is attached (TracerPid).
    pub tracer_pid: Option<i32>,
    pub tracer_comm: Option<String>,
}

/// What a kernel thread is, and who drives it when that can be known.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KernelThread {
    /// "writeback", "journal", "reclaim", "softirq", "workqueue", ...
    pub kind: String,
    pub what: String,
    /// Processes whose activity gives it work, busiest first.
    pub drivers: Vec<Driver>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Driver {
    pub pid: i32,
    pub comm: String,
    /// Bytes written to storage in the window (writeback, journal), or
    /// anonymous memory gained (reclaim).
    pub bytes: u64,
}

/// The target ended during the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Ended {
    pub after_s: f64,
    /// How, when known ("exited with code 3").
    pub how: Option<String>,
}

/// diagnose's own cost over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Cost {
    pub cpu_s: f64,
    /// Peak resident memory of kdiag (over the whole run when `run_cpu_s`
    /// is set).
    pub max_rss_kib: u64,
    /// CPU of the whole run, drill-downs included (None in records made
    /// before kdiag measured it).
    pub run_cpu_s: Option<f64>,
    /// The BPF programs the run loaded (None in records made before kdiag
    /// counted them).
    pub bpf: Option<BpfCost>,
}

/// The BPF programs a diagnose run loaded (its drill-downs' and exec
/// trace's), all unloaded by its end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BpfCost {
    pub programs: u64,
    /// Time the kernel spent in them and how many times they ran; None
    /// when the kernel kept no run-time statistics (`stats`).
    pub run_time_ns: Option<u64>,
    pub runs: Option<u64>,
    pub stats: BpfStats,
    /// Memory the kernel charged for their maps (`memlock` of each),
    /// summed over every object loaded; 0 in records made before.
    pub map_bytes: u64,
}

/// How the run time was measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BpfStats {
    /// `kernel.bpf_stats_enabled` was already on.
    AlreadyOn,
    /// Turned on for the run (BPF_ENABLE_STATS), off again at its end.
    TurnedOn,
    /// Could not be turned on: the run time is unknown.
    #[default]
    Unavailable,
}

impl Observation {
    /// Add `n` samples of one wait point.
    pub fn sample(&mut self, state: char, wchan: &str, syscall: &str, on: &str, n: u64) {
        match self
            .samples
            .iter_mut()
            .find(|s| s.state == state && s.wchan == wchan && s.syscall == syscall && s.on == on)
        {
            Some(s) => s.count += n,
            None => self.samples.push(ThreadSamples {
                state,
                wchan: wchan.to_string(),
                syscall: syscall.to_string(),
                on: on.to_string(),
                count: n,
            }),
        }
    }

    pub fn cpu_s(&self) -> f64 {
        self.totals.user_s + self.totals.system_s + self.totals.unseen_children_cpu_s
    }
}

/// A confidence in the verdict: how clearly one state dominates, and how
/// much was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Confidence {
    High,
    Medium,
    Low,
}

/// Seconds and share of the thread time in one state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateShare {
    pub state: ThreadState,
    pub seconds: f64,
    /// Of all thread time in the window.
    pub share: f64,
    /// Of the working time (thread time not sleeping by design).
    pub working_share: f64,
}

/// Bursts of work separated by pauses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Periodic {
    /// Share of the window spent in bursts.
    pub busy_share: f64,
    pub burst_s: f64,
    /// Start to start.
    pub period_s: Option<f64>,
}

/// A member's share of the tree's CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberShare {
    pub pid: i32,
    pub comm: String,
    pub cpu_share: f64,
}

/// A member's share of the tree's time in the verdict's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Carrier {
    pub pid: i32,
    pub comm: String,
    pub share: f64,
}

/// Files read through page faults: the kernel time taken from the CPU time
/// and counted as waiting for storage (analysis::tsa::fault_reads).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FaultReads {
    pub major_faults: u64,
    pub minor_faults: u64,
    pub read_bytes: u64,
    /// Kernel CPU seconds counted as storage.
    pub kernel_s: f64,
    /// All kernel CPU seconds of the window.
    pub system_s: f64,
}
