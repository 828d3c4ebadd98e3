//! The processes diagnose watches: one process, or a process and every
//! process it creates during the window (found by their parent PID in a
//! scan of /proc every 100 ms; orphans re-parented to kdiag's supervisor,
//! its child subreaper, stay in). Each member's counters are read at the start, at
//! every scan (the process's own stat: CPU and faults of all its threads,
//! dead ones included), and at the end; per-thread counters (run-queue
//! delay, block-I/O delay, context switches) at both ends only, and at
//! every scan too while the tree has few threads, so short-lived threads
//! count.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::model::diagnosis::{Member, MemoryPoint, Stopped, Totals};
use crate::model::process::{Io, SmapsRollup};
use crate::sys::procfs::parse::Stat;
use crate::sys::procfs::task::TaskReader;

/// Threads' schedstat is read at every scan while the tree has at most
/// this many threads (cheap), else only at both ends.
pub const SCAN_THREADS_MAX: usize = 64;
/// A member's thread list is read again when its thread count changes, and
/// at least this often.
const RELIST_EVERY: Duration = Duration::from_secs(1);
/// PF_KTHREAD in the task flags (stat field 9).
pub const PF_KTHREAD: u32 = 0x0020_0000;

/// Process-level counters from /proc/PID/stat.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    utime: u64,
    stime: u64,
    cutime: u64,
    cstime: u64,
    minflt: u64,
    majflt: u64,
}

impl Counters {
    fn of(s: &Stat) -> Counters {
        Counters {
            utime: s.utime,
            stime: s.stime,
            cutime: s.cutime,
            cstime: s.cstime,
            minflt: s.minflt,
            majflt: s.majflt,
        }
    }
}

/// One thread's counters: schedstat's run-queue delay, the block-I/O
/// delay (read only while delay accounting is on), and its context
/// switches (read only while the tree has few threads, for the series).
#[derive(Debug, Clone, Copy, Default)]
struct ThreadCounters {
    run_delay_ns: u64,
    schedstat_zero: bool,
    blkio_ticks: u64,
    voluntary: u64,
    involuntary: u64,
}

#[derive(Debug, Default)]
struct Thread {
    base: ThreadCounters,
    last: ThreadCounters,
    /// Not in the last thread list: ended (its counters stay).
    gone: bool,
}

#[derive(Debug)]
struct Proc {
    comm: String,
    ppid: i32,
    started: bool,
    ended: bool,
    base: Counters,
    last: Counters,
    num_threads: usize,
    max_threads: usize,
    threads: BTreeMap<i32, Thread>,
    listed: Instant,
    io_base: Option<Io>,
    io_last: Option<Io>,
    smaps_base: Option<SmapsRollup>,
    smaps_last: Option<SmapsRollup>,
    /// Total CPU (own and reaped children's) at the last read: what its
    /// parent's cutime/cstime gains when it reaps it.
    lifetime_ticks: u64,
}

pub struct Tree {
    pub root: i32,
    /// Follow descendants.
    follow: bool,
    /// Processes whose parent is this PID (kdiag's supervisor, the
    /// subreaper of the command kdiag started) belong to the tree.
    adopter: Option<i32>,
    /// The processes of this cgroup (and those below it) belong to the
    /// tree too (`diagnose --cgroup`).
    cgroup: Option<PathBuf>,
    members: BTreeMap<i32, Proc>,
    known: HashSet<i32>,
    /// Boot-relative clock ticks at the start of the window.
    t0_ticks: u64,
    t0: Instant,
    last_scan: Instant,
    /// Thread-seconds lived in the window, summed over threads.
    pub thread_s: f64,
    /// Stopped members seen.
    pub stopped: Option<Stopped>,
    /// Every member was a kernel thread.
    pub kernel_thread: bool,
    /// The root's names as seen at each scan, with counts: a workqueue
    /// worker's name says which work it runs ("kworker/u8:1+flush-254:0"
    /// while it writes back), and changes as the pool moves it around.
    pub names: HashMap<String, u32>,
    /// kernel.task_delayacct is on: threads' block-I/O delay is read.
    delayacct: bool,
}

impl Tree {
    /// The root and (when following) its descendants, with their counters
    /// at the start. None when the root does not exist.
    pub fn start(
        r: &mut TaskReader,
        root: i32,
        follow: bool,
        adopter: Option<i32>,
        cgroup: Option<PathBuf>,
        delayacct: bool,
    ) -> Option<Tree> {
        let st = r.stat(root, None)?;
        let mut tree = Tree {
            root,
            follow,
            adopter,
            cgroup,
            members: BTreeMap::new(),
            known: HashSet::new(),
            t0_ticks: now_ticks(),
            t0: Instant::now(),
            last_scan: Instant::now(),
            thread_s: 0.0,
            stopped: None,
            kernel_thread: st.flags & PF_KTHREAD != 0,
            names: HashMap::new(),
            delayacct,
        };
        tree.names.insert(st.comm.clone(), 1);
        tree.add(r, root, st, false);
        if follow {
            tree.discover(r, true);
        }
        Some(tree)
    }

    /// Add a member; `started` when it began during the window (its
    /// counters count from zero).
    fn add(&mut self, r: &mut TaskReader, pid: i32, st: Stat, started: bool) {
        let c = Counters::of(&st);
        let base = if started { Counters::default() } else { c };
        let mut p = Proc {
            comm: st.comm.clone(),
            ppid: st.ppid,
            started,
            ended: matches!(st.state, 'Z' | 'X') && st.num_threads <= 1,
            base,
            last: c,
            num_threads: st.num_threads as usize,
            max_threads: st.num_threads as usize,
            threads: BTreeMap::new(),
            listed: Instant::now(),
            io_base: None,
            io_last: None,
            smaps_base: None,
            smaps_last: None,
            lifetime_ticks: lifetime(&st),
        };
        let io = r.io(pid);
        p.io_base = if started { Some(Io::default()) } else { io };
        p.io_last = io;
        p.smaps_base = r.smaps_rollup(pid);
        let switches = self.live_threads() + st.num_threads as usize <= SCAN_THREADS_MAX;
        for tid in r.tids(pid) {
            let now = thread_counters(r, pid, tid, self.delayacct, switches);
            let base = if started {
                ThreadCounters::default()
            } else {
                now.unwrap_or_default()
            };
            p.threads.insert(
                tid,
                Thread {
                    base,
                    last: now.unwrap_or(base),
                    gone: false,
                },
            );
        }
        self.members.insert(pid, p);
    }

    /// Find processes whose parent is a member (or the adopter); at the
    /// start every descendant, later only PIDs new since the last scan.
    fn discover(&mut self, r: &mut TaskReader, first: bool) {
        let Ok(pids) = r.pids() else { return };
        let mut candidates: HashMap<i32, Stat> = HashMap::new();
        for &pid in &pids {
            if self.known.contains(&pid) || self.members.contains_key(&pid) {
                continue;
            }
            if let Some(st) = r.stat_once(pid) {
                candidates.insert(pid, st);
            }
        }
        self.known = pids.into_iter().collect();
        let in_cgroup: HashSet<i32> = match &self.cgroup {
            Some(dir) => crate::sys::procfs::pressure::cgroup_pids(dir)
                .unwrap_or_default()
                .into_iter()
                .collect(),
            None => HashSet::new(),
        };
        // Parents before children, whatever their PIDs.
        loop {
            let joining: Vec<i32> = candidates
                .iter()
                .filter(|(pid, st)| {
                    self.members.contains_key(&st.ppid)
                        || Some(st.ppid) == self.adopter
                        || in_cgroup.contains(pid)
                })
                .map(|(&pid, _)| pid)
                .collect();
            if joining.is_empty() {
                break;
            }
            for pid in joining {
                let st = candidates.remove(&pid).expect("candidate");
                let started = !first || st.start_ticks > self.t0_ticks;
                self.add(r, pid, st, started);
            }
        }
    }

    /// Every 100 ms: each member's counters and state, new threads and
    /// members, and the thread time lived since the last scan.
    pub fn scan(&mut self, r: &mut TaskReader) {
        let dt = self.last_scan.elapsed().as_secs_f64();
        self.last_scan = Instant::now();
        let few_threads = self.live_threads() <= SCAN_THREADS_MAX;
        let mut lived = 0usize;
        for (&pid, p) in self.members.iter_mut().filter(|(_, p)| !p.ended) {
            let Some(st) = r.stat(pid, None) else {
                p.ended = true;
                continue;
            };
            p.last = Counters::of(&st);
            p.lifetime_ticks = lifetime(&st);
            p.ppid = st.ppid;
            p.comm = st.comm.clone();
            if pid == self.root {
                *self.names.entry(st.comm.clone()).or_default() += 1;
            }
            if matches!(st.state, 'Z' | 'X') && st.num_threads <= 1 {
                p.ended = true;
                continue;
            }
            lived += st.num_threads as usize;
            if matches!(st.state, 'T' | 't') && self.stopped.is_none() {
                // TracerPid names the tracing thread; report its process.
                let thread = r.status(pid, None).map_or(0, |s| s.tracer_pid);
                let tracer = match thread {
                    0 => None,
                    t => Some(r.status(t, None).map_or(t, |s| s.tgid)),
                };
                self.stopped = Some(Stopped {
                    pid,
                    tracer_pid: tracer,
                    tracer_comm: tracer.and_then(|t| r.comm(t)),
                });
            }
            let n = st.num_threads as usize;
            p.max_threads = p.max_threads.max(n);
            if n != p.num_threads || p.listed.elapsed() >= RELIST_EVERY {
                p.num_threads = n;
                p.listed = Instant::now();
                let tids = r.tids(pid);
                for (tid, t) in p.threads.iter_mut() {
                    t.gone = tids.binary_search(tid).is_err();
                }
                for &tid in &tids {
                    p.threads.entry(tid).or_default();
                }
            }
            if few_threads {
                for (&tid, t) in p.threads.iter_mut().filter(|(_, t)| !t.gone) {
                    if let Some(s) = r.schedstat(pid, tid) {
                        t.last.run_delay_ns = s.1;
                        t.last.schedstat_zero = s == (0, 0, 0);
                    }
                }
            }
        }
        self.thread_s += lived as f64 * dt;
        if self.follow {
            self.discover(r, false);
        }
    }

    /// Memory of the live members by kind, and their storage counters.
    pub fn memory(&mut self, r: &mut TaskReader, t: f64) -> MemoryPoint {
        let mut m = MemoryPoint {
            t,
            ..Default::default()
        };
        for (&pid, p) in self.members.iter_mut().filter(|(_, p)| !p.ended) {
            if let Some(s) = r.status(pid, None) {
                m.anon_kib += s.rss_anon_kib.unwrap_or(0);
                m.file_kib += s.rss_file_kib.unwrap_or(0);
                m.shmem_kib += s.rss_shmem_kib.unwrap_or(0);
                m.swap_kib += s.swap_kib.unwrap_or(0);
            }
            if let Some(io) = r.io(pid) {
                p.io_last = Some(io);
            }
        }
        m
    }

    /// Last reads at the end of the window: every live thread's counters,
    /// storage bytes and the mappings' summary.
    pub fn finish(&mut self, r: &mut TaskReader) {
        self.scan(r);
        for (&pid, p) in self.members.iter_mut().filter(|(_, p)| !p.ended) {
            for tid in r.tids(pid) {
                if let Some(c) = thread_counters(r, pid, tid, self.delayacct, false) {
                    let t = p.threads.entry(tid).or_default();
                    t.last = ThreadCounters {
                        voluntary: t.last.voluntary,
                        involuntary: t.last.involuntary,
                        ..c
                    };
                }
            }
            if let Some(io) = r.io(pid) {
                p.io_last = Some(io);
            }
            p.smaps_last = r.smaps_rollup(pid);
        }
    }

    /// At a point of the series: every live thread's counters (context
    /// switches included) while the tree has few threads, and the members'
    /// storage counters. False when it had too many threads to read.
    pub fn refresh(&mut self, r: &mut TaskReader) -> bool {
        let few = self.live_threads() <= SCAN_THREADS_MAX;
        for (&pid, p) in self.members.iter_mut().filter(|(_, p)| !p.ended) {
            if let Some(io) = r.io(pid) {
                p.io_last = Some(io);
            }
            if !few {
                continue;
            }
            for (&tid, t) in p.threads.iter_mut().filter(|(_, t)| !t.gone) {
                if let Some(c) = thread_counters(r, pid, tid, self.delayacct, true) {
                    t.last = c;
                }
            }
        }
        few
    }

    /// Voluntary and involuntary context switches in the window, summed
    /// over the threads (as last read by `refresh`).
    pub fn context_switches(&self) -> (u64, u64) {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        self.members
            .values()
            .flat_map(|p| p.threads.values())
            .fold((0, 0), |(v, i), t| {
                (
                    v + d(t.last.voluntary, t.base.voluntary),
                    i + d(t.last.involuntary, t.base.involuntary),
                )
            })
    }

    /// (pid, tid) of every thread of the live members, for sampling.
    pub fn threads(&self) -> Vec<(i32, i32)> {
        self.members
            .iter()
            .filter(|(_, p)| !p.ended)
            .flat_map(|(&pid, p)| {
                p.threads
                    .iter()
                    .filter(|(_, t)| !t.gone)
                    .map(move |(&tid, _)| (pid, tid))
            })
            .collect()
    }

    pub fn live_threads(&self) -> usize {
        self.members
            .values()
            .filter(|p| !p.ended)
            .map(|p| p.num_threads)
            .sum()
    }

    /// Every member has ended.
    pub fn ended(&self) -> bool {
        self.members.values().all(|p| p.ended)
    }

    pub fn comm(&self) -> String {
        self.members
            .get(&self.root)
            .map(|p| p.comm.clone())
            .unwrap_or_default()
    }

    /// The members' figures and their sums, for the observation.
    pub fn report(&self, hz: f64) -> (Vec<Member>, Totals) {
        let mut t = Totals::default();
        let mut members = Vec::new();
        let mut any_schedstat = false;
        let mut blkio = 0u64;
        // A thread that was already waiting when delay accounting was
        // switched on gets its whole uptime counted as one wait: no thread
        // can have waited longer than the window.
        let window_ticks = (self.t0.elapsed().as_secs_f64() * hz).ceil() as u64;
        // CPU of reaped children, by the PID that reaped them.
        let mut reaped_seen: HashMap<i32, u64> = HashMap::new();
        for p in self.members.values().filter(|p| p.ended) {
            *reaped_seen.entry(p.ppid).or_default() += p.lifetime_ticks;
        }
        for (&pid, p) in &self.members {
            let d = |a: u64, b: u64| a.saturating_sub(b);
            let mut run_delay = 0u64;
            for th in p.threads.values() {
                any_schedstat |= !th.last.schedstat_zero;
                run_delay += d(th.last.run_delay_ns, th.base.run_delay_ns);
                blkio += d(th.last.blkio_ticks, th.base.blkio_ticks).min(window_ticks);
            }
            let children = d(p.last.cutime + p.last.cstime, p.base.cutime + p.base.cstime);
            let seen = reaped_seen.get(&pid).copied().unwrap_or(0);
            t.unseen_children_cpu_s += d(children, seen) as f64 / hz;
            let io = p.io_base.zip(p.io_last);
            let m = Member {
                pid,
                ppid: p.ppid,
                comm: p.comm.clone(),
                started: p.started,
                ended: p.ended,
                user_s: d(p.last.utime, p.base.utime) as f64 / hz,
                system_s: d(p.last.stime, p.base.stime) as f64 / hz,
                run_delay_s: Some(run_delay as f64 / 1e9),
                threads: p.max_threads,
                read_bytes: io.map(|(a, b)| d(b.read_bytes, a.read_bytes)),
                write_bytes: io.map(|(a, b)| d(b.write_bytes, a.write_bytes)),
                minor_faults: d(p.last.minflt, p.base.minflt),
                major_faults: d(p.last.majflt, p.base.majflt),
                states: Default::default(),
            };
            t.user_s += m.user_s;
            t.system_s += m.system_s;
            t.minor_faults += m.minor_faults;
            t.major_faults += m.major_faults;
            t.read_bytes = add(t.read_bytes, m.read_bytes);
            t.write_bytes = add(t.write_bytes, m.write_bytes);
            t.threads += m.threads;
            members.push(m);
        }
        if any_schedstat {
            t.run_delay_s = Some(members.iter().filter_map(|m| m.run_delay_s).sum());
        } else {
            members.iter_mut().for_each(|m| m.run_delay_s = None);
        }
        t.blkio_delay_s = Some(blkio as f64 / hz);
        t.processes = members.len();
        t.thread_s = self.thread_s;
        (members, t)
    }

    /// The mappings' summary summed over the members, at the start and end.
    pub fn smaps(&self) -> (Option<SmapsRollup>, Option<SmapsRollup>) {
        let sum = |f: fn(&Proc) -> Option<SmapsRollup>| {
            self.members
                .values()
                .filter_map(f)
                .reduce(|a, b| a.plus(&b))
        };
        (sum(|p| p.smaps_base), sum(|p| p.smaps_last))
    }
}

fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

/// CPU ticks a process has used, its reaped children's included.
fn lifetime(st: &Stat) -> u64 {
    st.utime + st.stime + st.cutime + st.cstime
}

/// A thread's counters; its stat (for the block-I/O delay) only when
/// delay accounting is on, since it is zero otherwise, and its status (for
/// context switches) only when asked.
fn thread_counters(
    r: &mut TaskReader,
    pid: i32,
    tid: i32,
    delayacct: bool,
    switches: bool,
) -> Option<ThreadCounters> {
    let sched = r.schedstat(pid, tid)?;
    let blkio = if delayacct {
        r.stat(pid, Some(tid)).and_then(|s| s.blkio_ticks)
    } else {
        None
    };
    let status = switches.then(|| r.status(pid, Some(tid))).flatten();
    Some(ThreadCounters {
        run_delay_ns: sched.1,
        schedstat_zero: sched == (0, 0, 0),
        blkio_ticks: blkio.unwrap_or(0),
        voluntary: status.map_or(0, |s| s.voluntary_ctxt),
        involuntary: status.map_or(0, |s| s.nonvoluntary_ctxt),
    })
}

/// Now in boot-relative clock ticks, the unit of a process's start time.
fn now_ticks() -> u64 {
    let up = std::fs::read("/proc/uptime")
        .map(|b| crate::sys::procfs::parse::uptime(&b))
        .unwrap_or(0.0);
    (up * crate::sys::procfs::hz() as f64) as u64
}
