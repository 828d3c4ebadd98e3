//! diagnose's time series, one point per interval: the tree's counters
//! (read at a scan the loop makes at each point) differenced against the
//! last point's; the interval's thread samples split into states the way
//! the whole window's are (`tsa::budget` on the interval's own
//! observation); RSS by kind. Each point is kept and, for a live view,
//! sent over a channel.

use std::sync::mpsc::Sender;

use crate::analysis::tsa;
use crate::model::diagnosis::{Memory, MemoryPoint, Observation, ThreadState, Totals};
use crate::model::trend::{Limit, Reading, Trend};
use crate::sys::procfs::task::TaskReader;

use super::tree::Tree;

/// Series names (the thread states' are their `describe()`).
pub const CPU: &str = "CPU";
pub const READ: &str = "storage read";
pub const WRITTEN: &str = "storage written";
pub const BLKIO_DELAY: &str = "block-I/O delay";
pub const RSS_ANON: &str = "RSS anonymous";
pub const RSS_FILE: &str = "RSS file";
pub const MINOR_FAULTS: &str = "minor faults";
pub const MAJOR_FAULTS: &str = "major faults";
pub const VOLUNTARY: &str = "voluntary switches";
pub const INVOLUNTARY: &str = "involuntary switches";

/// Thread states, in the order their series come.
const STATES: [ThreadState; 8] = [
    ThreadState::OnCpu,
    ThreadState::RunQueue,
    ThreadState::Storage,
    ThreadState::Lock,
    ThreadState::Paging,
    ThreadState::Stopped,
    ThreadState::Sleeping,
    ThreadState::Other,
];

/// The counters at the last point.
struct Last {
    t: f64,
    totals: Totals,
    switches: (u64, u64),
    /// Threads' counters were read (few threads).
    threads_read: bool,
}

pub struct SeriesRecorder {
    trend: Trend,
    live: Option<Sender<Reading>>,
    delayacct: bool,
    hz: f64,
    last: Last,
    /// Points without per-thread counters (too many threads).
    unread: usize,
}

impl SeriesRecorder {
    /// Start at the beginning of the window (the tree's counters just read).
    pub fn start(
        interval_s: f64,
        live: Option<Sender<Reading>>,
        delayacct: bool,
        tree: &mut Tree,
        r: &mut TaskReader,
    ) -> SeriesRecorder {
        let hz = crate::sys::procfs::hz() as f64;
        let threads_read = tree.refresh(r);
        SeriesRecorder {
            trend: Trend {
                interval_s,
                ..Default::default()
            },
            live,
            delayacct,
            hz,
            last: Last {
                t: 0.0,
                totals: tree.report(hz).1,
                switches: tree.context_switches(),
                threads_read,
            },
            unread: 0,
        }
    }

    /// When the last point was taken (0 before the first).
    pub fn last_t(&self) -> f64 {
        self.last.t
    }

    /// One point at `t` (seconds into the window), just after a scan;
    /// `memory` the RSS reads so far (the last one just made).
    pub fn point(
        &mut self,
        t: f64,
        tree: &mut Tree,
        r: &mut TaskReader,
        sampler: &mut super::sampling::ThreadSampler,
        memory: &[MemoryPoint],
    ) {
        let threads_read = tree.refresh(r);
        let totals = tree.report(self.hz).1;
        let switches = tree.context_switches();
        let (a, b) = (&self.last.totals, &totals);
        let dt = (t - self.last.t).max(1e-3);
        let per_s = |x: u64, y: u64| x.saturating_sub(y) as f64 / dt;
        let both = threads_read && self.last.threads_read;
        self.unread += usize::from(!both);
        let mut values = Vec::new();

        // The interval's own thread-state budget, as for the window.
        let d = |x: f64, y: f64| (x - y).max(0.0);
        let mut o = Observation {
            window_s: dt,
            totals: Totals {
                user_s: d(b.user_s, a.user_s),
                system_s: d(b.system_s, a.system_s),
                unseen_children_cpu_s: d(b.unseen_children_cpu_s, a.unseen_children_cpu_s),
                run_delay_s: b.run_delay_s.zip(a.run_delay_s).map(|(x, y)| d(x, y)),
                blkio_delay_s: (self.delayacct && both)
                    .then(|| b.blkio_delay_s.zip(a.blkio_delay_s).map(|(x, y)| d(x, y)))
                    .flatten(),
                thread_s: d(b.thread_s, a.thread_s),
                ..Default::default()
            },
            memory: Memory {
                series: memory[memory.len().saturating_sub(2)..].to_vec(),
                ..Default::default()
            },
            delay_accounting: self.delayacct,
            ..Default::default()
        };
        sampler.take_interval(&mut o);
        if o.totals.thread_s > 0.0 {
            let budget = tsa::budget(&o);
            for s in STATES {
                let share = budget
                    .states
                    .iter()
                    .find(|x| x.state == s)
                    .map_or(0.0, |x| x.share);
                values.push((s.describe(), "%", share * 100.0));
            }
        }
        values.push((CPU, "CPUs", o.cpu_s() / dt));
        if let (Some(x), Some(y)) = (b.read_bytes, a.read_bytes) {
            values.push((READ, "B/s", per_s(x, y)));
        }
        if let (Some(x), Some(y)) = (b.write_bytes, a.write_bytes) {
            values.push((WRITTEN, "B/s", per_s(x, y)));
        }
        if let Some(delay) = o.totals.blkio_delay_s {
            values.push((BLKIO_DELAY, "s/s", delay / dt));
        }
        if let Some(m) = memory.last() {
            values.push((RSS_ANON, "B", (m.anon_kib * 1024) as f64));
            values.push((RSS_FILE, "B", (m.file_kib * 1024) as f64));
        }
        values.push((MINOR_FAULTS, "/s", per_s(b.minor_faults, a.minor_faults)));
        values.push((MAJOR_FAULTS, "/s", per_s(b.major_faults, a.major_faults)));
        if both {
            values.push((VOLUNTARY, "/s", per_s(switches.0, self.last.switches.0)));
            values.push((INVOLUNTARY, "/s", per_s(switches.1, self.last.switches.1)));
        }
        let reading = Reading { t, values };
        self.trend.add(&reading);
        if let Some(tx) = &self.live {
            // A view that has gone only stops being drawn.
            let _ = tx.send(reading);
        }
        self.last = Last {
            t,
            totals,
            switches,
            threads_read,
        };
    }

    /// The series of the window: thread states never seen left out, with
    /// the memory limit of `pid` and notes on what could not be kept.
    pub fn finish(mut self, pid: i32, r: &mut TaskReader) -> Trend {
        let names: Vec<&str> = STATES.iter().map(|s| s.describe()).collect();
        self.trend
            .series
            .retain(|s| !names.contains(&s.name.as_str()) || s.values().any(|v| v > 0.0));
        if !self.delayacct {
            self.trend.notes.push(
                "block-I/O delay per interval needs delay accounting (sysctl kernel.task_delayacct=1)"
                    .into(),
            );
        }
        if self.unread > 0 {
            self.trend.notes.push(format!(
                "context switches and block-I/O delay are read per thread, with at most {} threads: \
                 {} interval{} without them",
                super::tree::SCAN_THREADS_MAX,
                self.unread,
                if self.unread == 1 { "" } else { "s" }
            ));
        }
        self.trend.memory_limit = memory_limit(pid, r);
        self.trend
    }
}

/// What a growing RSS meets first: the tightest memory.max of its cgroup
/// and their parents, else its address-space limit, else the machine's
/// available memory.
fn memory_limit(pid: i32, r: &mut TaskReader) -> Option<Limit> {
    if let Some((path, max, current)) = crate::sys::cgroup::memory_max(pid) {
        return Some(Limit {
            what: format!("the cgroup limit (memory.max of {path})"),
            limit_bytes: max,
            headroom_bytes: max.saturating_sub(current),
        });
    }
    if let Some(limit) = crate::sys::process::rusage::address_space_limit(pid) {
        let size = r.stat(pid, None).map_or(0, |s| s.vsize);
        return Some(Limit {
            what: "its address-space limit (RLIMIT_AS)".into(),
            limit_bytes: limit,
            headroom_bytes: limit.saturating_sub(size),
        });
    }
    let m = crate::sys::procfs::system().ok()?.memory;
    Some(Limit {
        what: "the machine's available memory (MemAvailable)".into(),
        limit_bytes: m.total_kib * 1024,
        headroom_bytes: m.available_kib * 1024,
    })
}
