//! `kdiag watch`'s collector: every interval a scan reads each watched
//! process's counters (CPU time, run-queue wait, faults, storage bytes:
//! `source::Counters`) and closes the interval of each group (diagnose's
//! model judges it, `analysis::watch`); every tick between scans a few
//! threads of a few groups are sampled with diagnose's own `ThreadSampler`
//! (state, system call, what it waits on). The counters come from a BPF
//! task iterator where the kernel allows it (`bpf.rs`: one binary record
//! per thread, nothing formatted), else from three /proc files per process
//! (`proc.rs`); `open` picks the tier. The cost is bounded whatever the
//! machine runs: one walk of the tasks (or the files) per interval, and
//! at most `GROUPS_PER_TICK` × `THREADS_PER_GROUP` thread samples per
//! tick, the busiest groups first.

mod bpf;
pub mod container;
mod proc;
pub mod source;

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::PathBuf;

use std::time::Instant;

use self::source::{CounterSource, Counters};
use crate::analysis::watch::{Interval, judge};
use crate::instruments::observe::limits;
use crate::instruments::observe::sampling::ThreadSampler;
use crate::instruments::{self, Ask, Fallback, Tier};
use crate::model::diagnosis::{Class, Observation, ThreadSamples, ThreadState, Weight};
use crate::model::watch::{Cost, Group, RunsAs, Snapshot};
use crate::sys::cgroupfs;
use crate::sys::procfs::{self, parse, pressure, task::TaskReader};

/// watch's tiers: where the processes' counters come from.
pub const TIERS: instruments::Tiers = instruments::Tiers {
    name: "watch",
    auto: "the BPF task iterator where the kernel allows it, else /proc",
    rows: &[
        instruments::TierRow {
            tier: Tier::Bpf,
            sees: "a BPF task iterator: every task's counters read in the kernel at each scan, \
                   as binary records",
            works: |p| p.bpf_iter_task.is_ok(),
        },
        instruments::TierRow {
            tier: Tier::Procfs,
            sees: "/proc/PID/stat, io and schedstat of every process at each scan, formatted \
                   as text by the kernel",
            works: |_| true,
        },
    ],
};

/// Groups sampled per tick: half the busiest, half in rotation over the rest.
const GROUPS_PER_TICK: usize = 16;
/// Threads sampled per group per tick, in rotation over the group's threads.
const THREADS_PER_GROUP: usize = 4;
/// A group not seen for this many scans is forgotten (its counters restart
/// if it comes back, which Prometheus' rate() reads as a reset).
const FORGET_AFTER_SCANS: u64 = 10;

/// How processes are grouped into series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupBy {
    /// The container or systemd service a process runs in (its cgroup),
    /// else its name
    Auto,
    /// The process name (comm)
    Name,
    /// The cgroup the process is in
    Cgroup,
}

/// Which processes are watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    All,
    Pid(i32),
    /// A cgroup directory and every cgroup below it.
    Cgroup(PathBuf),
    /// The cgroups of a container or pod by the name their paths give
    /// it, found again at every scan (`container`).
    Container(String),
}

#[derive(Debug, Clone)]
pub struct Options {
    pub scope: Scope,
    pub group_by: GroupBy,
    /// Groups exported, the busiest first.
    pub top: usize,
}

/// watch's collector, the tier asked for (`Auto`: the task iterator where
/// it loads, else /proc).
pub fn open(ask: Ask) -> anyhow::Result<(Box<dyn CounterSource>, Option<Fallback>)> {
    instruments::open(
        ask,
        vec![
            (
                Tier::Bpf,
                Box::new(|| Ok(Box::new(bpf::IterCounters::open()?) as Box<dyn CounterSource>)),
            ),
            (
                Tier::Procfs,
                Box::new(|| Ok(Box::new(proc::ProcCounters::new()) as Box<dyn CounterSource>)),
            ),
        ],
    )
}

/// A process seen by the scans, and its counters at the last.
struct Proc {
    start: u64,
    group: String,
    /// Its cgroup (`pressure::cgroup_of`), read when first seen, and
    /// whether it is its group.
    cgroup: String,
    by_cgroup: bool,
    /// The last scan that saw it.
    seen: u64,
    last: Option<Totals>,
}

/// A process's counters at a scan.
#[derive(Clone, Copy, Default)]
struct Totals {
    cpu_ns: u64,
    major: u64,
    read: u64,
    write: u64,
    run_delay_ns: u64,
}

/// A group: its totals since watch started and the interval under way.
#[derive(Default)]
struct GroupAcc {
    total: Group,
    interval: Interval,
    major: u64,
    read: u64,
    write: u64,
    /// (pid, thread count) of its processes at the last scan.
    pids: Vec<(i32, u32)>,
    /// (pid, CPU and run-queue seconds, storage bytes) of its processes
    /// over the last interval: who carries its verdict.
    activity: Vec<(i32, f64, u64)>,
    /// Its threads, listed when it is first sampled in an interval.
    tids: Option<Vec<(i32, i32)>>,
    cursor: usize,
    sampler: Option<ThreadSampler>,
    /// The last interval's samples, used again when an interval has none.
    samples: Vec<ThreadSamples>,
    /// The cgroup all its processes were in at the last scan, if one;
    /// whether it is the group (a container's, a unit's, --group-by cgroup).
    cgroup: Option<String>,
    mixed: bool,
    is_cgroup: bool,
    /// That cgroup's path and its place in the hierarchy with the cpu
    /// controller, for its throttling's export (found once a path: None
    /// inside, not found).
    cpu: Option<(String, Option<cgroupfs::Place>)>,
    /// Its processes' cgroups in every hierarchy and the ancestors that
    /// limit them, read as diagnose reads them: what judges its verdict.
    limits: Option<limits::LimitWatch>,
    seen_scan: u64,
}

pub struct Watcher {
    opts: Options,
    source: Box<dyn CounterSource>,
    /// The last scan's counters (kept for their capacity).
    counters: Vec<Counters>,
    reader: TaskReader,
    procs: HashMap<i32, Proc>,
    groups: HashMap<String, GroupAcc>,
    /// Group names, the busiest of the last interval first.
    order: Vec<String>,
    rotation: usize,
    last: Option<(Instant, f64)>,
    scans: u64,
    hz: f64,
    samples_total: u64,
    /// The cgroup hierarchies mounted here (read once).
    mounts: Vec<cgroupfs::Mount>,
}

impl Watcher {
    /// A watcher reading its counters from `source` (`open`).
    pub fn new(opts: Options, source: Box<dyn CounterSource>) -> Watcher {
        Watcher {
            opts,
            source,
            counters: Vec::new(),
            reader: TaskReader::default(),
            procs: HashMap::new(),
            groups: HashMap::new(),
            order: Vec::new(),
            rotation: 0,
            last: None,
            scans: 0,
            hz: procfs::hz() as f64,
            samples_total: 0,
            mounts: cgroupfs::mounts(),
        }
    }

    /// The tier its counters come from.
    pub fn tier(&self) -> Tier {
        self.source.tier()
    }

    /// The processes watched; None: every one.
    fn pids(&self) -> anyhow::Result<Option<Vec<i32>>> {
        Ok(Some(match &self.opts.scope {
            Scope::All => return Ok(None),
            Scope::Pid(p) => vec![*p],
            Scope::Cgroup(dir) => pressure::cgroup_pids(dir)
                .map_err(|e| anyhow::anyhow!("cannot read cgroup {}: {e}", dir.display()))?,
            // None while a container restarts: nothing to watch this scan.
            // A cgroup removed while read is one gone.
            Scope::Container(name) => {
                let mut pids: Vec<i32> = container::dirs(name)
                    .iter()
                    .flat_map(|d| pressure::cgroup_pids(d).unwrap_or_default())
                    .collect();
                pids.sort_unstable();
                pids.dedup();
                pids
            }
        }))
    }

    /// Read every watched process's counters, close the interval of every
    /// group and return the exposition's content.
    pub fn scan(&mut self) -> anyhow::Result<Snapshot> {
        let began = Instant::now();
        let uptime = std::fs::read("/proc/uptime").map_or(0.0, |b| parse::uptime(&b));
        let dt = self.last.map(|(t, _)| t.elapsed().as_secs_f64());
        let first = self.last.is_none();
        self.scans += 1;
        let pids = self.pids()?;
        self.source
            .read(pids.as_deref(), &mut self.reader, &mut self.counters)?;
        for g in self.groups.values_mut() {
            g.pids.clear();
            g.activity.clear();
            (g.cgroup, g.mixed) = (None, false);
        }
        let scan = self.scans;
        for st in &self.counters {
            let pid = st.pid;
            // Updated in place, not moved to a new table each scan: a
            // process seen before costs one lookup and no allocation.
            // A new process's cgroups, read once: its group's and its limits'.
            let mut text = None;
            let p = match self.procs.entry(pid) {
                Entry::Occupied(e) if e.get().start == st.start_ticks => e.into_mut(),
                e => {
                    // A cgroup is read once, when the process is first seen.
                    text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok();
                    let cgroup = text.as_deref().map_or("/".into(), pressure::cgroup_of);
                    let by_cgroup = match self.opts.group_by {
                        GroupBy::Name => false,
                        GroupBy::Cgroup => true,
                        // Watching one container, it is the scope already:
                        // its processes by name.
                        GroupBy::Auto => {
                            !matches!(self.opts.scope, Scope::Container(_))
                                && container_or_unit(&cgroup)
                        }
                    };
                    let group = if by_cgroup {
                        cgroup.clone()
                    } else {
                        st.comm.clone()
                    };
                    let new = Proc {
                        start: st.start_ticks,
                        group,
                        cgroup,
                        by_cgroup,
                        seen: 0,
                        last: None,
                    };
                    match e {
                        Entry::Occupied(mut e) => {
                            e.insert(new);
                            e.into_mut()
                        }
                        Entry::Vacant(e) => e.insert(new),
                    }
                }
            };
            p.seen = scan;
            // By name, the name now: a process that execs (a shell that
            // becomes the workload) changes group.
            let moved = !p.by_cgroup && p.group != st.comm;
            if moved {
                p.group.clone_from(&st.comm);
            }
            let now = Totals {
                cpu_ns: st.cpu_ns,
                major: st.major_faults,
                read: st.read_bytes,
                write: st.write_bytes,
                run_delay_ns: st.run_delay_ns,
            };
            let base = p.last.replace(now);
            // Looked up before it is inserted: no key to copy per process.
            if !self.groups.contains_key(&p.group) {
                let acc = GroupAcc {
                    total: Group {
                        name: p.group.clone(),
                        ..Group::default()
                    },
                    ..GroupAcc::default()
                };
                self.groups.insert(p.group.clone(), acc);
            }
            let g = self.groups.get_mut(&p.group).expect("inserted above");
            g.seen_scan = scan;
            g.is_cgroup = p.by_cgroup;
            if g.pids.is_empty() {
                g.cgroup = Some(p.cgroup.clone());
            } else if g.cgroup.as_ref() != Some(&p.cgroup) {
                g.mixed = true;
            }
            g.pids.push((pid, st.threads));
            // Its cgroups, placed once a group: from the text just read (a
            // new process) or read again (one that joined after an exec);
            // not a lookup per process per scan.
            let limits =
                (g.limits).get_or_insert_with(|| limits::LimitWatch::new(self.mounts.clone()));
            if text.is_some() || moved {
                limits.place(pid, text.as_deref());
            }
            if let Some(dt) = dt {
                // A process new since the last scan counts from its start.
                let (base, lived) = match base {
                    Some(b) => (b, dt),
                    None => (
                        Totals::default(),
                        (uptime - st.start_ticks as f64 / self.hz).clamp(0.0, dt),
                    ),
                };
                let i = &mut g.interval;
                let cpu_s = now.cpu_ns.saturating_sub(base.cpu_ns) as f64 / 1e9;
                let delay_s = now.run_delay_ns.saturating_sub(base.run_delay_ns) as f64 / 1e9;
                let bytes = (now.read + now.write).saturating_sub(base.read + base.write);
                g.activity.push((pid, cpu_s + delay_s, bytes));
                i.cpu_s += cpu_s;
                i.run_delay_s += delay_s;
                i.thread_s += st.threads as f64 * lived;
                i.threads += st.threads as usize;
                i.processes += 1;
                g.major += now.major.saturating_sub(base.major);
                g.read += now.read.saturating_sub(base.read);
                g.write += now.write.saturating_sub(base.write);
            }
        }
        self.procs.retain(|_, p| p.seen == scan);
        // The files kept open of processes gone, and of threads other
        // than a main one (the sampler reopens them).
        let procs = &self.procs;
        self.reader
            .retain(|pid, tid| (tid == 0 || tid == pid) && procs.contains_key(&pid));
        let scans = self.scans;
        self.groups
            .retain(|_, g| scans - g.seen_scan < FORGET_AFTER_SCANS);
        if !first {
            self.close_intervals(dt.unwrap_or(0.0));
        }
        self.rank();
        self.last = Some((Instant::now(), uptime));
        let scan_s = began.elapsed().as_secs_f64();
        Ok(self.snapshot(scan_s, dt.unwrap_or(0.0)))
    }

    fn close_intervals(&mut self, dt: f64) {
        // Each cgroup read once, however many groups it limits.
        let mut reads = limits::Reads::now();
        for g in self.groups.values_mut() {
            let mut o = Observation::default();
            if let Some(mut s) = g.sampler.take() {
                s.take_interval(&mut o);
            }
            if !o.samples.is_empty() {
                g.samples = o.samples;
            }
            let mut i = std::mem::take(&mut g.interval);
            i.window_s = dt;
            let limits = match g.limits.as_mut() {
                Some(l) => {
                    l.keep(&g.pids.iter().map(|p| p.0).collect());
                    l.interval(&mut reads)
                }
                None => Default::default(),
            };
            let (secs, working, verdict) = judge(&i, &g.samples, limits);
            // Until a thread of the group has been sampled its off-CPU
            // time has no state: only the counters' states count, and it
            // has no verdict (it is not exported).
            let known = !g.samples.is_empty();
            let t = &mut g.total;
            for (k, (acc, s)) in t.thread_seconds.iter_mut().zip(secs).enumerate() {
                if known || k < 2 {
                    *acc += s;
                }
            }
            t.major_faults += std::mem::take(&mut g.major);
            t.read_bytes += std::mem::take(&mut g.read);
            t.write_bytes += std::mem::take(&mut g.write);
            if known {
                t.verdict = Some(verdict);
            }
            t.working_s = if known { working } else { secs[0] + secs[1] };
            t.processes = i.processes;
            t.threads = i.threads;
            g.tids = None;
        }
    }

    /// The groups, the busiest of the last interval first: they are
    /// sampled first and exported first.
    fn rank(&mut self) {
        let mut order: Vec<(&String, f64)> = self
            .groups
            .iter()
            .map(|(n, g)| (n, g.total.working_s))
            .collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        self.order = order.into_iter().map(|(n, _)| n.clone()).collect();
    }

    /// Sample a few threads of a few groups (between scans, every tick).
    pub fn sample(&mut self) {
        let half = GROUPS_PER_TICK / 2;
        let mut picked: Vec<String> = self.order.iter().take(half).cloned().collect();
        let rest = self.order.len().saturating_sub(half);
        for k in 0..half.min(rest) {
            picked.push(self.order[half + (self.rotation + k) % rest].clone());
        }
        self.rotation = self.rotation.wrapping_add(half);
        for name in picked {
            let Some(g) = self.groups.get_mut(&name) else {
                continue;
            };
            let tids = g.tids.get_or_insert_with(|| {
                let mut v = Vec::new();
                for &(pid, n) in &g.pids {
                    if n <= 1 {
                        v.push((pid, pid));
                    } else {
                        v.extend(procfs::tids(pid).into_iter().map(|t| (pid, t)));
                    }
                }
                v
            });
            if tids.is_empty() {
                continue;
            }
            let n = THREADS_PER_GROUP.min(tids.len());
            let slice: Vec<(i32, i32)> =
                (0..n).map(|k| tids[(g.cursor + k) % tids.len()]).collect();
            g.cursor = (g.cursor + n) % tids.len();
            let sampler = g
                .sampler
                .get_or_insert_with(|| ThreadSampler::new(THREADS_PER_GROUP));
            sampler.tick(&mut self.reader, &slice, slice.len(), 0);
            self.samples_total += n as u64;
        }
    }

    /// The process of `group` that carries `verdict`, to drill down on:
    /// the one that moved the most bytes to or from storage for a verdict
    /// its carriers show waiting for storage, else the one with the most CPU and run-queue time; None
    /// when the group has no process left.
    pub fn carrier(&self, group: &str, verdict: Class) -> Option<i32> {
        let g = self.groups.get(group)?;
        let storage =
            matches!(verdict.spec().weight, Weight::States(s) if s.contains(&ThreadState::Storage));
        let by_bytes = g.activity.iter().filter(|a| a.2 > 0).max_by_key(|a| a.2);
        let by_work = g.activity.iter().max_by(|a, b| a.1.total_cmp(&b.1));
        storage
            .then_some(by_bytes)
            .flatten()
            .or(by_work)
            .map(|a| a.0)
            .or(g.pids.first().map(|p| p.0))
    }

    /// Group names still watched (a flight count of another is dropped).
    pub fn knows(&self, group: &str) -> bool {
        self.groups.contains_key(group)
    }

    fn snapshot(&mut self, scan_s: f64, interval_s: f64) -> Snapshot {
        let by_cgroup = self.opts.group_by == GroupBy::Cgroup;
        let mounts = &self.mounts;
        let mut groups: Vec<Group> = Vec::new();
        for n in &self.order {
            let Some(g) = self.groups.get_mut(n) else {
                continue;
            };
            if g.total.verdict.is_none() {
                continue;
            }
            if groups.len() == self.opts.top {
                break;
            }
            let mut out = g.total.clone();
            if g.is_cgroup {
                if let Some(place) = g.cpu_place(mounts) {
                    let c = crate::instruments::observe::limits::cpu_counters(place);
                    (out.throttled_s, out.throttled_periods) =
                        (Some(c.throttled_ns as f64 / 1e9), Some(c.throttled));
                }
                out.runs_as = crate::analysis::runs_as::runs_as(n).map(|r| RunsAs {
                    what: r.what.to_string(),
                    name: r.name,
                    pod: r.pod,
                });
            }
            groups.push(out);
        }
        groups.sort_by(|a, b| a.name.cmp(&b.name));
        let me = std::process::id() as i32;
        let st = self.reader.stat_once(me).unwrap_or_default();
        Snapshot {
            groups,
            pressure: pressure::read(),
            cost: Cost {
                cpu_s: (st.utime + st.stime) as f64 / self.hz,
                rss_bytes: st.rss_pages * crate::sys::page_size(),
                scan_s,
                processes: self.procs.len(),
                samples_total: self.samples_total,
            },
            interval_s,
            flight: Vec::new(),
            by_cgroup,
            pid: match self.opts.scope {
                Scope::Pid(p) => Some(p),
                _ => None,
            },
        }
    }
}

impl GroupAcc {
    /// Its processes' one cgroup, in the hierarchy with the cpu controller
    /// (found from its first process's cgroups, once); None for the root
    /// or when its processes are in several cgroups.
    fn cpu_place(&mut self, mounts: &[cgroupfs::Mount]) -> Option<&cgroupfs::Place> {
        let path = self.cgroup.as_ref().filter(|p| *p != "/" && !self.mixed)?;
        let pid = self.pids.first()?.0;
        // Found again when its processes moved (a group by name).
        if self.cpu.as_ref().is_some_and(|(p, _)| p != path) {
            self.cpu = None;
        }
        let (_, found) = self.cpu.get_or_insert_with(|| {
            let found = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                .ok()
                .and_then(|text| {
                    cgroupfs::places(&text, mounts)
                        .into_iter()
                        .find(|p| p.path == *path && p.has("cpu"))
                });
            (path.clone(), found)
        });
        found.as_ref()
    }
}

/// A cgroup path that names a container or a systemd service or scope
/// (`runs_as`): watch's default groups its processes by it. A login
/// session or a user's manager groups everything its user runs: not one.
fn container_or_unit(path: &str) -> bool {
    crate::analysis::runs_as::runs_as(path)
        .is_some_and(|r| !matches!(r.what, "login session" | "user manager of UID"))
}
