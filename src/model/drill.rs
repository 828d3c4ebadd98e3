//! Diagnose's drill-downs (`Drill`) and what they found (`Why`): the
//! profiles' summaries, the
//! block I/O the target caused (storage), the processes it competed with
//! for the CPUs (sched), and the execs that failed (exec-trace's
//! explanation). Saved and loaded with the rest of a diagnosis (record and
//! replay).

use serde::{Deserialize, Serialize};

use crate::model::flame::Flame;
use crate::model::{offcpu, profile};

/// One drill-down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Drill {
    /// Where the CPU time goes: a CPU profile.
    Cpu,
    /// Where the threads wait: an off-CPU profile.
    Offcpu,
    /// What it asks of storage: its block requests (iosnoop).
    Storage,
    /// Who else has the CPUs: every process's CPU time (/proc).
    Sched,
    /// Why an exec failed: exec tracing, during the whole watch (an exec
    /// is over in a millisecond, so it cannot wait for the verdict).
    Exec,
}

impl Drill {
    /// What it records, for the user.
    pub fn what(self) -> &'static str {
        match self {
            Drill::Cpu => "CPU profile",
            Drill::Offcpu => "off-CPU profile",
            Drill::Storage => "block I/O trace",
            Drill::Sched => "CPU use of every process",
            Drill::Exec => "exec trace",
        }
    }

    /// Whether it needs root (tracing); the others read /proc.
    pub fn needs_root(self) -> bool {
        self != Drill::Sched
    }
}

/// The block requests the target caused over the drill window, as
/// `kdiag iosnoop -p PID --summary` shows them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StorageDrill {
    /// The tracing tier ("bpf" or "perf") and the events it lost.
    pub tier: String,
    pub lost: u64,
    /// Requests the target's processes caused, and their bytes.
    pub requests: u64,
    pub bytes: u64,
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
    /// Who submitted block I/O: the target's processes, then the kernel
    /// threads that write for it (and for every other process) on the
    /// same disks: the journal and writeback flushers.
    pub submitters: Vec<Submitter>,
    /// Request types (rwbs: "WS" is a synchronous write) by count, most
    /// first.
    pub types: Vec<TypeCount>,
    /// The most common request sizes, most frequent first.
    pub sizes: Vec<SizeCount>,
    /// Latency in log2 buckets of microseconds: `latency_us[k]` counts the
    /// requests of 2^k to 2^(k+1)-1 µs (slot 0: 0 and 1 µs).
    pub latency_us: Vec<u64>,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Requests continuing the previous one of the same process, device
    /// and direction, of those that could (0..1).
    pub sequential_share: f64,
    /// Share of requests with the sync flag (O_SYNC, fsync, O_DIRECT).
    pub sync_share: f64,
    /// Ranges one process read or wrote again and again.
    pub repeated: Vec<RepeatedRange>,
}

/// A process, or a kernel thread, that submitted block requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Submitter {
    pub pid: u32,
    pub comm: String,
    pub requests: u64,
    pub bytes: u64,
    /// None for the target's own processes; for a kernel thread, what it
    /// is ("journal", "writeback"): it writes for every process on the
    /// disk, this one included.
    pub kernel: Option<String>,
    /// Of its requests, those another task issued to the device (the
    /// block layer's kworker after a plug or a requeue), by that task.
    pub issued_by: Vec<TypeCount>,
}

/// A name and how many times it was seen.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TypeCount {
    pub name: String,
    pub count: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SizeCount {
    pub bytes: u64,
    pub count: u64,
}

/// A device range one process read or wrote several times over, each time
/// as the same run of back-to-back requests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RepeatedRange {
    /// "read" or "write".
    pub op: String,
    pub disk: String,
    pub sector: u64,
    pub bytes: u64,
    pub times: u64,
    pub pid: u32,
    pub comm: String,
    /// The sentence iosnoop prints for it.
    pub text: String,
}

/// Who had the CPUs while the target waited for one: every process's CPU
/// time at both ends of the drill window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Competition {
    /// CPUs online.
    pub cpus: usize,
    /// The CPUs the target may run on (its affinity, "0-1").
    pub target_cpus: String,
    /// The target's processes together, percent of one CPU.
    pub target_percent: f64,
    /// Every process together (the target included), percent of one CPU:
    /// at most `cpus` x 100.
    pub total_percent: f64,
    /// The other processes with the most CPU, most first.
    pub others: Vec<Competitor>,
}

/// A competitor a learner may not see: its name in place of the comm.
pub const ANOTHER_USERS: &str = "another user's process";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Competitor {
    /// 0 for another user's process (`ANOTHER_USERS`), unnamed.
    pub pid: i32,
    pub comm: String,
    /// Percent of one CPU over the window.
    pub cpu_percent: f64,
    /// The CPUs it may run on, when not all of them.
    pub cpus: Option<String>,
}

/// The execs of the target and of everything it started during the watch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExecDrill {
    /// The tracing tier ("bpf" or "perf") and the events it lost.
    pub tier: String,
    pub lost: u64,
    /// Exec attempts seen (a shell's tries along $PATH included).
    pub execs: u64,
    /// The failures, each distinct one once, most frequent first.
    pub failures: Vec<ExecFailure>,
}

/// One way an exec failed, explained as `kdiag exec-trace` explains it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExecFailure {
    /// How many attempts failed this way, and the last one's process.
    pub times: u64,
    pub pid: u32,
    pub filename: Option<String>,
    /// exec-trace's family ("after-point-of-no-return", "format-error", ...).
    pub family: String,
    pub errno: Option<String>,
    /// The fatal signal that followed, e.g. "SIGSEGV (SI_KERNEL)".
    pub signal: Option<String>,
    /// The loader rule elf-check finds broken, with the fields to fix.
    pub cause: Option<String>,
    /// The whole explanation.
    pub text: String,
}

/// Samples a function needs on the CPU to be named the hottest: with
/// fewer, which function leads is chance.
pub const HOT_MIN_SAMPLES: u64 = 10;

/// What the drill-downs found (diagnose/drill.rs fills it in; `analysis::why` plans them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Why {
    /// Seconds each drill-down ran.
    pub window_s: f64,
    /// They ran after the watch window: (the window's end, their start),
    /// seconds from the window's start; None in older records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_window: Option<(f64, f64)>,
    /// The CPU profile's top functions and stacks.
    pub cpu: Option<profile::Summary>,
    /// The off-CPU profile's wait points and blocking paths.
    pub offcpu: Option<offcpu::Summary>,
    /// The block requests it caused (iosnoop's summary).
    pub storage: Option<StorageDrill>,
    /// The processes it competed with for the CPUs.
    pub competition: Option<Competition>,
    /// Its execs (and its children's) over the whole watch, when one
    /// failed (or with --why all).
    pub exec: Option<ExecDrill>,
    /// Drill-downs that could not run: why, and the command that would.
    pub skipped: Vec<String>,
    /// The CPU profile's folded stacks, for its flame graph.
    pub cpu_flame: Option<Flame>,
    /// The off-CPU profile's folded stacks, for its flame graph.
    pub offcpu_flame: Option<Flame>,
    /// Frames the profiles could not name, by the runtime or binary that
    /// made them (`analysis::runtimes`): how to get names for them.
    pub unnamed: Vec<UnnamedFrames>,
    /// The JVMs kdiag asked for their perf map before the profiles
    /// (`jcmd PID Compiler.perfmap`), or why it did not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub perf_maps: Vec<PerfMapAsk>,
    /// CPython processes' Python stacks, read from their memory during
    /// the drill-down (`instruments::profile::python_stacks`), or why not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub python: Vec<PythonStacks>,
    /// For the HTML report: the same window as a wall-clock profile per
    /// thread, with when each stack's time was spent (its heat map).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall: Option<crate::model::wall::Wall>,
}

/// A HotSpot JVM asked for its perf map, so that the profiles name its
/// Java frames; the map kdiag caused is removed after them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PerfMapAsk {
    pub pid: i32,
    /// The uid jcmd ran as (the JVM's); None: kdiag did not ask.
    pub uid: Option<u32>,
    /// The map's entries (compiled methods and the JVM's stubs).
    pub entries: usize,
    /// Why kdiag did not ask, or why asking failed; None: the map was
    /// written and read.
    pub why_not: Option<String>,
}

/// A CPython process's threads' innermost Python functions, sampled.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PythonStacks {
    pub pid: i32,
    /// Times its stacks were read, the threads read, and those of them
    /// running Python code (one sample each).
    pub rounds: u64,
    /// Reads a second.
    pub hz: u64,
    pub threads_sampled: u64,
    pub samples: u64,
    /// The innermost functions, the most sampled first.
    pub functions: Vec<PyFunction>,
    /// Why nothing was read ("not named: CPython layout not recognised").
    pub why_not: Option<String>,
}

/// A Python function, its file and its most sampled line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PyFunction {
    pub name: String,
    pub file: String,
    pub line: u32,
    pub samples: u64,
}

impl PyFunction {
    /// As py-spy words it: `spin (<string>:3)`.
    pub fn label(&self) -> String {
        format!("{} ({}:{})", self.name, self.file, self.line)
    }
}

/// A runtime (or a stripped binary) whose frames the drill-downs' stacks
/// hold without names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnnamedFrames {
    pub runtime: Runtime,
    /// For a stripped binary: its path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// The processes the drill-downs traced (the advice names them).
    pub pids: Vec<i32>,
    /// Share of the profile's weight in stacks with such frames (0..100),
    /// the larger of the CPU and off-CPU profiles'.
    pub percent: f64,
}

/// What made frames that have no names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    /// The JVM's JIT and interpreter, in anonymous executable memory.
    Jvm,
    /// Node's V8, in anonymous executable memory.
    Node,
    /// CPython's interpreter loop (every Python function is one frame).
    Python,
    /// Anonymous executable memory of a runtime kdiag does not know.
    Jit,
    /// A binary without symbols.
    Stripped,
}

impl Why {
    /// Whether any drill-down found something (else the report's "next"
    /// commands are still the way to the why).
    pub fn found_any(&self) -> bool {
        self.cpu.is_some()
            || self.offcpu.is_some()
            || self.storage.is_some()
            || self.competition.is_some()
            || self.exec.is_some()
    }

    /// The hottest function on the CPU: the program's first in the
    /// self-time list, else the kernel's; None when it has fewer than
    /// `HOT_MIN_SAMPLES` samples, too few to call it the hottest (one
    /// sample of `do_task_stat` named it before).
    pub fn hot_function(&self) -> Option<String> {
        if let Some((f, of)) = self.python_hot() {
            return Some(format!(
                "{} in Python ({} of {of} thread samples)",
                f.label(),
                f.samples
            ));
        }
        let cpu = self.cpu.as_ref()?;
        cpu.top_self
            .iter()
            .find(|f| !f.kernel)
            .or(cpu.top_self.first())
            .filter(|f| f.samples >= HOT_MIN_SAMPLES)
            .map(|f| f.name.clone())
    }

    /// The Python function CPython's threads ran most (the interpreter's
    /// loop hides it from the native profile), with its samples; None
    /// with fewer than `HOT_MIN_SAMPLES`.
    pub fn python_hot(&self) -> Option<(&PyFunction, u64)> {
        self.python
            .iter()
            .filter_map(|p| Some((p.functions.first()?, p.samples)))
            .max_by_key(|(f, _)| f.samples)
            .filter(|(f, _)| f.samples >= HOT_MIN_SAMPLES)
    }
}
