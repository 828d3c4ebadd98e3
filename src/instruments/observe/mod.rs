//! Watch a process, or a process tree, for a window, for `kdiag diagnose`.
//! Amounts come from counters (`tree`: CPU, run-queue delay, faults,
//! storage bytes, read at both ends and every 100 ms per process); sampling
//! (`sampling`: a bounded number of threads every 20 ms) only says where
//! threads wait, and memory (RSS by kind) is read every 250 ms. At every
//! interval (`series`) the counters and memory are read once more for the
//! time series. What it cost kdiag is measured over the same window.

pub mod competition;
mod jvm;
mod kthread;
pub mod limits;
pub mod sampling;
pub mod series;
mod stalls;
mod tree;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use crate::model::diagnosis::{Cost, Ended, Observation, Scope, Zombie};
use crate::model::trend::Reading;
use crate::sys::process::rusage::own_usage;
use crate::sys::procfs::task::TaskReader;

/// Sampling tick, and the most threads sampled in one.
const TICK: Duration = Duration::from_millis(20);
const THREADS_PER_TICK: usize = 8;
/// Counters and the tree every SCAN, memory every MEMORY, and the busy
/// series in buckets of BUCKET.
const SCAN: Duration = Duration::from_millis(100);
const MEMORY: Duration = Duration::from_millis(250);
const BUCKET: Duration = Duration::from_millis(100);

pub struct Options {
    pub window: Duration,
    pub scope: Scope,
    /// One point of the time series every interval.
    pub interval: Duration,
    /// Where each point goes as it is taken (a live view).
    pub live: Option<Sender<Reading>>,
    /// Every process of this cgroup (and below) is a member too.
    pub cgroup: Option<std::path::PathBuf>,
}

/// Watch `pid` (and with a tree or command scope, its descendants) for
/// the window, less if everything ends or `stop` is set. An error when the
/// process does not exist at the start.
pub fn observe(pid: i32, opts: &Options, stop: &AtomicBool) -> anyhow::Result<Observation> {
    let (cpu0, _) = own_usage();
    let mut r = TaskReader::default();
    let root = r
        .stat(pid, None)
        .ok_or_else(|| crate::error::NoSuchProcess::one(pid))?;
    // A command kdiag started runs under kdiag's supervisor, the child
    // subreaper of its tree: orphans become the supervisor's children, and
    // stay in the tree.
    let adopter = (opts.scope == Scope::Command).then_some(root.ppid);
    let follow = opts.scope != Scope::Process;
    let delayacct =
        std::fs::read_to_string("/proc/sys/kernel/task_delayacct").is_ok_and(|s| s.trim() == "1");
    let mut tree = tree::Tree::start(&mut r, pid, follow, adopter, opts.cgroup.clone(), delayacct)
        .ok_or_else(|| crate::error::NoSuchProcess::one(pid))?;
    let mut o = Observation {
        pid,
        comm: tree.comm(),
        scope: opts.scope,
        cgroup: opts.cgroup.as_ref().map(|d| d.display().to_string()),
        delay_accounting: delayacct,
        ..Default::default()
    };
    if matches!(root.state, 'Z' | 'X') && tree.ended() && opts.scope != Scope::Command {
        o.zombie = Some(Zombie {
            parent_pid: root.ppid,
            parent_comm: r.comm(root.ppid).unwrap_or_default(),
        });
        return Ok(o);
    }
    let drivers = tree.kernel_thread.then(|| kthread::Drivers::start(&mut r));
    let mut sampler = sampling::ThreadSampler::new(THREADS_PER_TICK);
    let mut series = series::SeriesRecorder::start(
        opts.interval.as_secs_f64(),
        opts.live.clone(),
        delayacct,
        &mut tree,
        &mut r,
    );
    let t0 = Instant::now();
    let (mut next_scan, mut next_memory) = (t0 + SCAN, t0);
    let mut next_point = t0 + opts.interval;
    let mut threads = tree.threads();
    let mut live = tree.live_threads();
    let mut limits = limits::LimitWatch::start(&pids(&threads));
    let jvm = jvm::JvmWatch::start(pid);
    let stalls = stalls::StallWatch::start(&mut r, &threads);
    while t0.elapsed() < opts.window && !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let t = now - t0;
        // A point of the series reads everything afresh.
        let point = now >= next_point;
        if now >= next_memory || point {
            let m = tree.memory(&mut r, t.as_secs_f64());
            o.memory.series.push(m);
            if now >= next_memory {
                next_memory += MEMORY;
            }
        }
        if now >= next_scan || point {
            tree.scan(&mut r);
            if now >= next_scan {
                next_scan += SCAN;
            }
            if tree.ended() {
                break;
            }
            threads = tree.threads();
            live = tree.live_threads();
            limits.scan(&pids(&threads));
            r.forget_except(&threads.iter().copied().collect());
        }
        if point {
            let s = t.as_secs_f64();
            series.point(s, &mut tree, &mut r, &mut sampler, &o.memory.series);
            next_point += opts.interval;
        }
        let bucket = (t.as_nanos() / BUCKET.as_nanos()) as usize;
        sampler.tick(&mut r, &threads, live, bucket);
        std::thread::sleep(TICK.saturating_sub(now.elapsed()));
    }
    // The rest of the window makes a last point when it is half an
    // interval or more.
    let t = t0.elapsed().as_secs_f64();
    if !tree.ended() && t - series.last_t() >= opts.interval.as_secs_f64() / 2.0 {
        o.memory.series.push(tree.memory(&mut r, t));
        tree.scan(&mut r);
        series.point(t, &mut tree, &mut r, &mut sampler, &o.memory.series);
    }
    o.window_s = t0.elapsed().as_secs_f64();
    o.limits = limits.finish();
    o.jvm = jvm.map(jvm::JvmWatch::finish);
    o.trend = series.finish(pid, &mut r);
    tree.finish(&mut r);
    if tree.ended() {
        o.ended = Some(Ended {
            after_s: o.window_s,
            how: None,
        });
    }
    o.kernel_thread = drivers.map(|d| d.finish(&mut r, &tree.names));
    let (members, mut totals) = tree.report(crate::sys::procfs::hz() as f64);
    if !o.delay_accounting {
        totals.blkio_delay_s = None;
    }
    o.members = members;
    o.totals = totals;
    sampler.into_observation(&mut o, BUCKET.as_secs_f64());
    o.stalls = stalls.finish(&mut r, &o.locks);
    o.sampling.interval_ms = TICK.as_millis() as u64;
    o.stopped = tree.stopped.take();
    (o.memory.start, o.memory.end) = tree.smaps();
    let (cpu1, max_rss_kib) = own_usage();
    o.cost = Cost {
        cpu_s: cpu1 - cpu0,
        max_rss_kib,
        run_cpu_s: None,
        bpf: None,
    };
    Ok(o)
}

/// The processes of (pid, tid) pairs.
fn pids(threads: &[(i32, i32)]) -> Vec<i32> {
    let mut v: Vec<i32> = threads.iter().map(|t| t.0).collect();
    v.dedup();
    v
}
