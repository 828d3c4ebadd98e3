//! What `kdiag diagnose` watched (an `Observation` of one process over a
//! window) and what it concluded (a `Diagnosis`).

use serde::Serialize;

/// The dominant problem. The names match the `expect.class` the bundled
/// workloads print with `--describe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// On CPU most of the time.
    Cpu,
    /// Runnable but waiting for a CPU.
    Sched,
    /// Waiting for storage (D state, bytes moving).
    Io,
    /// Threads asleep in futex waits.
    Lock,
    /// Resident memory growing steadily.
    MemoryTrend,
    /// Mostly asleep, doing little.
    Idle,
}

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::Cpu => "cpu",
            Class::Sched => "sched",
            Class::Io => "io",
            Class::Lock => "lock",
            Class::MemoryTrend => "memory-trend",
            Class::Idle => "idle",
        }
    }
}

/// One process over a window: counter deltas, state samples and an RSS series.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Observation {
    pub pid: i32,
    pub comm: String,
    pub window_s: f64,
    /// Most threads seen at once.
    pub threads: usize,
    /// CPU time used in the window (user and system).
    pub user_s: f64,
    pub system_s: f64,
    /// Time its threads waited runnable for a CPU (schedstat run_delay);
    /// None when the kernel keeps no schedstats.
    pub run_delay_s: Option<f64>,
    /// Storage bytes (/proc/PID/io); None when not readable.
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// Every thread sampled every 10 ms: how often each (state, wait
    /// channel) pair was seen.
    pub samples: Vec<ThreadSamples>,
    /// (seconds since the start, RSS in KiB).
    pub rss_kib: Vec<(f64, u64)>,
}

/// How often threads were seen in one state, waiting in one place.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ThreadSamples {
    /// R, S, D, ...
    pub state: char,
    /// The kernel function a sleeping thread waits in (/proc/TID/wchan);
    /// empty for a running one.
    pub wchan: String,
    pub count: u64,
}

impl Observation {
    /// Add one sample.
    pub fn sample(&mut self, state: char, wchan: &str) {
        match self
            .samples
            .iter_mut()
            .find(|s| s.state == state && s.wchan == wchan)
        {
            Some(s) => s.count += 1,
            None => self.samples.push(ThreadSamples {
                state,
                wchan: wchan.to_string(),
                count: 1,
            }),
        }
    }
}

/// A verdict with the numbers behind it and what to run next.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnosis {
    pub verdict: Class,
    /// One sentence.
    pub summary: String,
    pub evidence: Vec<String>,
    /// The instrument to run for the "why", as a command line.
    pub next: Vec<String>,
}
