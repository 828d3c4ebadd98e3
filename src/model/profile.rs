//! A profile: symbolized call stacks with how often, and how heavily, each
//! was seen, plus what it cost to collect. A CPU profile weighs stacks by
//! samples; an off-CPU profile (`kdiag offcpu`) by the time threads spent
//! blocked in them; a counting instrument (`kdiag faults`) by how many of
//! its event (page faults) happened on them.

use serde::{Deserialize, Serialize};

/// One frame of a symbolized stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Frame {
    /// The function (demangled), or `module+0xOFFSET`, or `[unknown]`.
    pub name: String,
    /// A kernel frame (shown with `_[k]` in folded output).
    pub kernel: bool,
    /// The binary it is in: an index into `Profile::modules`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<u32>,
}

impl Frame {
    pub fn user(name: impl Into<String>) -> Self {
        Frame {
            name: name.into(),
            kernel: false,
            module: None,
        }
    }

    pub fn kernel(name: impl Into<String>) -> Self {
        Frame {
            name: name.into(),
            kernel: true,
            module: None,
        }
    }
}

/// What a stack's weight counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightUnit {
    /// CPU samples: weights are sample periods, shown as samples.
    #[default]
    Samples,
    /// Off-CPU time: weights are nanoseconds blocked, shown as microseconds.
    Nanoseconds,
    /// Weights are counts of the event named in `Profile::event`
    /// (`page-faults`), shown as they are: a counting instrument needs no
    /// unit of its own.
    Events,
}

impl WeightUnit {
    /// What the counts of a report or flame graph count, given the
    /// profile's `event`: `samples`, `us` (blocked), or the event itself.
    pub fn count_name(self, event: &str) -> &str {
        match self {
            WeightUnit::Samples => "samples",
            WeightUnit::Nanoseconds => "us",
            WeightUnit::Events => event,
        }
    }
}

/// The state a thread left the CPU in (off-CPU profiles), from the
/// scheduler's own `prev_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum OffState {
    /// Preempted (or yielded): runnable, waiting for a CPU.
    R,
    /// Interruptible sleep: futex, poll, nanosleep, pipe and socket waits.
    S,
    /// Uninterruptible sleep: mostly storage I/O, some kernel locks.
    D,
    /// TASK_IDLE: idle kernel workers.
    I,
    /// Stopped or traced.
    T,
    /// Anything else.
    Other,
}

impl OffState {
    /// The letter ps shows (`?` for other states).
    pub fn letter(self) -> char {
        match self {
            OffState::R => 'R',
            OffState::S => 'S',
            OffState::D => 'D',
            OffState::I => 'I',
            OffState::T => 'T',
            OffState::Other => '?',
        }
    }

    /// What the state means, for reports.
    pub fn meaning(self) -> &'static str {
        match self {
            OffState::R => "preempted: runnable, waiting for a CPU",
            OffState::S => "sleeping (interruptible): locks, timers, pipes, sockets, polls",
            OffState::D => "uninterruptible: mostly storage I/O, some kernel locks",
            OffState::I => "idle kernel worker",
            OffState::T => "stopped or traced",
            OffState::Other => "another state",
        }
    }
}

/// A distinct call stack of one command, and its samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stack {
    /// The thread's command name (the flame graph's root).
    pub comm: String,
    /// Outermost first (the root's child), innermost (where the CPU was) last.
    pub frames: Vec<Frame>,
    /// Samples that landed on this stack (off-CPU: times a thread blocked here).
    pub samples: u64,
    /// Sum of the samples' periods (ns of CPU for cpu-clock, cycles for
    /// cycles): frequency mode varies the period, so this is the true weight.
    /// Off-CPU: nanoseconds blocked.
    pub weight: u64,
    /// User frames the kernel walked for these samples (the deepest seen):
    /// 1–2 means a binary without frame pointers.
    pub user_depth: u16,
    /// Off-CPU profiles: the state the thread blocked in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<OffState>,
    /// Off-CPU profiles with wakers: who woke the thread from this sleep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waker: Option<Waker>,
    /// Off-CPU profiles with wakers: sleeps still going on when the
    /// profile ended, so nothing had woken them yet.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ongoing: bool,
}

/// The thread that woke a sleeping one, and where it was when it did.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Waker {
    /// Its process and thread (0: an interrupt, whichever task it stopped).
    pub pid: u32,
    pub tid: u32,
    /// Its name, or `[interrupt]`.
    pub comm: String,
    /// Outermost first; the innermost is the kernel's `try_to_wake_up`.
    pub frames: Vec<Frame>,
}

/// What the DWARF unwind stage did (`--call-graph dwarf|auto`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct UnwindStats {
    /// Samples whose user stack came from DWARF unwinding.
    pub dwarf_samples: u64,
    /// Samples that kept the kernel's frame-pointer chain (auto mode).
    pub fp_samples: u64,
    /// User frames found by DWARF unwinding, in all.
    pub dwarf_frames: u64,
    /// DWARF unwinds that stopped because the next frame lay beyond the
    /// copied stack (raise --stack-size).
    pub stack_exhausted: u64,
    /// Samples with a user context but no stack copy (the kernel could not
    /// read the user stack).
    pub no_stack: u64,
    /// Time spent unwinding, seconds (during recording).
    pub secs: f64,
}

/// A binary that frames came from (for pprof mappings).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    pub path: String,
    /// The GNU build id, lowercase hex, when the file has one.
    pub build_id: Option<String>,
}

/// kdiag's own cost while it recorded: the probe effect.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeCost {
    /// kdiag's CPU time (user + system) during recording, seconds.
    pub kdiag_cpu_secs: f64,
    /// Wall time of the recording, seconds.
    pub wall_secs: f64,
    /// CPU time of what was profiled during the recording, where known.
    pub profiled_cpu_secs: Option<f64>,
    /// Time from the end of recording to the finished report, seconds.
    pub post_secs: f64,
}

/// The thread a stack of a per-thread profile was seen in.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct ThreadId {
    /// The process (tgid).
    pub pid: u32,
    pub tid: u32,
}

/// A finished profile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// What was profiled: `PID 42 (sh)`, `all CPUs`, `cpu-burn --mode kernel`.
    pub target: String,
    /// When recording started (UTC, RFC 3339).
    pub started: String,
    /// The same, in ns since the Unix epoch.
    pub started_unix_ns: u64,
    /// The event sampled (`cpu-clock` or `cycles`), or counted
    /// (`WeightUnit::Events`: `page-faults`).
    pub event: String,
    /// Why this event and not a better one (e.g. no hardware PMU for cycles).
    pub event_note: Option<String>,
    pub freq_hz: u64,
    /// What stack weights count: samples (CPU), blocked nanoseconds
    /// (off-CPU) or events.
    pub unit: WeightUnit,
    /// How user stacks were walked: `fp`, `dwarf` or `auto`.
    pub call_graph: String,
    /// The user stack copied into each sample (dwarf and auto), bytes.
    pub stack_size: Option<u32>,
    /// What DWARF unwinding did, when it ran.
    pub unwind: Option<UnwindStats>,
    pub stacks: Vec<Stack>,
    /// Per-thread profiles (`kdiag profile --wall`): `stacks[i]`'s thread,
    /// stacks of different threads kept apart; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadId>,
    /// Per-thread profiles: when `stacks[i]`'s weight was seen, as
    /// (CLOCK_MONOTONIC ns it ended, weight): each sample's time and
    /// period, each stretch of blocked time as read from the kernel's
    /// tables (`analysis::wall` spreads a weight over the time before it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub times: Vec<Vec<(u64, u64)>>,
    /// The binaries frames came from (`Frame::module` indexes this).
    pub modules: Vec<Module>,
    /// Every sample kept (idle excluded unless asked for).
    pub samples: u64,
    /// Samples of the idle task left out (system-wide without --include-idle).
    pub idle_samples: u64,
    /// Records the kernel dropped because a ring was full (counted events:
    /// events a full table had no room for).
    pub lost: u64,
    /// Times the kernel throttled sampling.
    pub throttled: u64,
    /// Why frames could not be named, with how many frames each.
    pub unknown_frames: Vec<(String, u64)>,
    /// Set when the target went away before recording was asked to end.
    pub ended_early: Option<String>,
    /// How the stacks were collected, when not by perf sampling (a counting
    /// instrument's tier): the report's Tier line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collection: Option<String>,
    /// What the collection could not see, for the user.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    pub cost: ProbeCost,
}

impl Profile {
    /// Total weight of every stack.
    pub fn total_weight(&self) -> u64 {
        self.stacks.iter().map(|s| s.weight).sum()
    }
}

/// A function's share of the profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionShare {
    pub name: String,
    pub kernel: bool,
    /// Period-weighted samples.
    pub samples: u64,
    pub percent: f64,
}

/// A stack's share of the profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HotStack {
    pub comm: String,
    /// Outermost first.
    pub frames: Vec<String>,
    pub samples: u64,
    pub percent: f64,
}

/// A command whose user stacks stop after one or two frames.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TruncatedStacks {
    pub comm: String,
    /// Share of its samples with user frames whose user stack is 1–2 deep.
    pub percent: f64,
}

/// Everything the report shows about where the time went
/// (`analysis::fold::summarize`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub samples: u64,
    pub kernel_percent: f64,
    pub top_self: Vec<FunctionShare>,
    pub top_total: Vec<FunctionShare>,
    pub hottest: Vec<HotStack>,
    pub truncated: Vec<TruncatedStacks>,
}
