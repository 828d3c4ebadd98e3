//! A wall-clock profile (`kdiag profile --wall`): every thread's time over
//! the window, on the CPU (sampled, scaled to time) and off it (blocked
//! time by stack, state and what it waited for), in one unit: nanoseconds.

use serde::{Deserialize, Serialize};

use std::borrow::Cow;

use crate::model::profile::{Frame, Module, OffState, ProbeCost, Waker};

/// What a stretch of a thread's time was spent doing.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum TimeKind {
    /// Running on a CPU (sampled).
    OnCpu,
    /// Runnable, waiting for a CPU after being preempted.
    RunQueue,
    /// Uninterruptible: storage I/O (and some kernel locks).
    Storage,
    /// Waiting for a lock held by another thread (futex, kernel mutex).
    Lock,
    /// Sleeping on purpose: nanosleep, timers.
    Sleep,
    /// Any other wait: pipes, sockets, polls, conditions, stopped.
    Wait,
}

impl TimeKind {
    pub const ALL: [TimeKind; 6] = [
        TimeKind::OnCpu,
        TimeKind::RunQueue,
        TimeKind::Storage,
        TimeKind::Lock,
        TimeKind::Sleep,
        TimeKind::Wait,
    ];

    /// The short name reports, folded stacks and pprof labels use.
    pub fn name(self) -> &'static str {
        match self {
            TimeKind::OnCpu => "on-cpu",
            TimeKind::RunQueue => "run-queue",
            TimeKind::Storage => "storage",
            TimeKind::Lock => "lock",
            TimeKind::Sleep => "sleep",
            TimeKind::Wait => "wait",
        }
    }
}

/// Nanoseconds of each kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Times {
    pub on_cpu: u64,
    pub run_queue: u64,
    pub storage: u64,
    pub lock: u64,
    pub sleep: u64,
    pub wait: u64,
}

impl Times {
    pub fn get(&self, kind: TimeKind) -> u64 {
        match kind {
            TimeKind::OnCpu => self.on_cpu,
            TimeKind::RunQueue => self.run_queue,
            TimeKind::Storage => self.storage,
            TimeKind::Lock => self.lock,
            TimeKind::Sleep => self.sleep,
            TimeKind::Wait => self.wait,
        }
    }

    pub fn add(&mut self, kind: TimeKind, ns: u64) {
        let slot = match kind {
            TimeKind::OnCpu => &mut self.on_cpu,
            TimeKind::RunQueue => &mut self.run_queue,
            TimeKind::Storage => &mut self.storage,
            TimeKind::Lock => &mut self.lock,
            TimeKind::Sleep => &mut self.sleep,
            TimeKind::Wait => &mut self.wait,
        };
        *slot += ns;
    }

    pub fn total(&self) -> u64 {
        TimeKind::ALL.iter().map(|&k| self.get(k)).sum()
    }
}

/// One root of the profile: a thread, or (per process, or without thread
/// ids from the /proc tier) every thread of a name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Root {
    /// The process (0 when unknown: the /proc tier's rows).
    pub pid: u32,
    /// The thread (0 for a process root or an unknown thread).
    pub tid: u32,
    /// The thread's (or process's) name.
    pub comm: String,
}

impl Root {
    /// `comm [tid]`, `comm [pid]` or `comm`: the flame graph's root frame.
    pub fn label(&self) -> String {
        match (self.pid, self.tid) {
            (0, _) => self.comm.clone(),
            (pid, 0) => format!("{} [{pid}]", self.comm),
            (_, tid) => format!("{} [{tid}]", self.comm),
        }
    }
}

/// One root's time over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RootTime {
    pub root: Root,
    pub times: Times,
    /// CPU samples behind `times.on_cpu`.
    pub samples: u64,
    /// How far `times.on_cpu` may be from the truth: sampling's error,
    /// two standard deviations (2·√samples periods) plus one period.
    pub cpu_error_ns: u64,
}

/// A distinct stack of one root and one kind, with its time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WallStack {
    /// An index into `Wall::roots`.
    pub root: usize,
    pub kind: TimeKind,
    /// The state the thread blocked in (off-CPU stacks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<OffState>,
    /// Outermost first; empty for the /proc tier's waits, which have no stacks.
    pub frames: Vec<Frame>,
    /// Lock, sleep and other waits (BPF tier): the thread that woke this
    /// one at the end of each of these blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waker: Option<Waker>,
    /// Waits of those kinds still going on when the profile ended: nothing
    /// had woken them yet (their time counts up to the end).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ongoing: bool,
    /// Samples (on CPU) or blocks (off CPU).
    pub count: u64,
    pub ns: u64,
    /// When the time was spent: (slice of the window, `Wall::slice_ns`
    /// long, counted from its start; ns in it), by slice. Off-CPU time is
    /// placed exactly, each block before its end (the BPF ring of block
    /// ends); the /proc tier's samples at their sweeps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slices: Vec<(u32, u64)>,
}

/// The frame between a waiter's stack and its waker's in the graphs.
pub const WAKER_SEPARATOR: &str = "--";
/// In a waker's place: the wait had not ended when the profile did.
pub const STILL_WAITING: &str = "[still waiting at the end]";

impl WallStack {
    /// The frames the graphs and files draw, outermost first: the thread's
    /// own; with a waker, then the separator (`--`), the waker's stack
    /// innermost first and its name on top, as in Brendan Gregg's off-wake
    /// flame graphs (the two stacks meet where one woke the other).
    pub fn graph_frames(&self) -> Cow<'_, [Frame]> {
        if self.ongoing {
            let mut frames = self.frames.clone();
            frames.push(Frame::user(WAKER_SEPARATOR));
            frames.push(Frame::user(STILL_WAITING));
            return Cow::Owned(frames);
        }
        let Some(w) = &self.waker else {
            return Cow::Borrowed(&self.frames);
        };
        let mut frames = self.frames.clone();
        frames.push(Frame::user(WAKER_SEPARATOR));
        frames.extend(w.frames.iter().rev().cloned());
        frames.push(Frame::user(match w.tid {
            0 => w.comm.clone(),
            tid => format!("{} [{tid}]", w.comm),
        }));
        Cow::Owned(frames)
    }
}

/// Where the off-CPU half came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum OffcpuFrom {
    /// The BPF sched_switch programs: stacks and exact blocked time.
    Bpf,
    /// /proc sampled every `interval_ms`, without stacks; `why` BPF could not run.
    Proc { interval_ms: u64, why: String },
}

impl OffcpuFrom {
    /// How `collection` was made; `why` BPF could not run, when it could not.
    pub fn of(collection: &crate::model::offcpu::Collection, why: String) -> OffcpuFrom {
        match *collection {
            crate::model::offcpu::Collection::Bpf { .. } => OffcpuFrom::Bpf,
            crate::model::offcpu::Collection::Proc { interval_ms } => {
                OffcpuFrom::Proc { interval_ms, why }
            }
        }
    }
}

/// A finished wall-clock profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wall {
    /// What was profiled: `PID 42 (sh)`, `./server args`.
    pub target: String,
    pub started: String,
    pub started_unix_ns: u64,
    /// The window every root's time is measured against, ns.
    pub window_ns: u64,
    /// The length of the slices `WallStack::slices` counts time in, ns
    /// (the heat map's cells).
    #[serde(default)]
    pub slice_ns: u64,
    /// CPU sampling: the event (cpu-clock) and its rate.
    pub event: String,
    pub freq_hz: u64,
    /// Roots are processes (true) or threads.
    pub per_process: bool,
    pub offcpu: OffcpuFrom,
    /// By total time, largest first.
    pub roots: Vec<RootTime>,
    /// By time, largest first.
    pub stacks: Vec<WallStack>,
    /// The binaries `Frame::module` indexes.
    pub modules: Vec<Module>,
    /// Samples lost (full rings) and off-CPU stacks lost.
    pub lost_samples: u64,
    pub lost_stacks: u64,
    /// Off-CPU blocks that ended faster than their ends could be read:
    /// their time is in the totals but not placed in time (the heat map
    /// misses it).
    #[serde(default)]
    pub lost_ends: u64,
    pub ended_early: Option<String>,
    /// `cost.kdiag_cpu_secs` is kdiag's CPU while recording.
    pub cost: ProbeCost,
    /// kdiag's whole cost: its process's CPU from its start to the report
    /// (user + system, rusage: reading, symbolizing, writing included),
    /// and its BPF programs' run time, which runs in the traced threads and
    /// so is no part of kdiag's rusage (None where the kernel keeps no
    /// run-time statistics).
    #[serde(default)]
    pub run_cpu_secs: f64,
    #[serde(default)]
    pub bpf_run_secs: Option<f64>,
}
