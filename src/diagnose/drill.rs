//! The drill-downs after the verdict: the ones `--why` and the verdict call
//! for run at once, each on a thread, on the members that carry the verdict
//! (with the blocked threads' lock sweep beside them when it is worth a
//! look); one that cannot run says what to run by hand.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{Event, Request, WhyMode, words};
use crate::analysis::drill as summary;
use crate::analysis::locks;
use crate::analysis::runtimes;
use crate::analysis::why;
use crate::instruments::observe::competition;
use crate::instruments::target::Scope;
use crate::instruments::{block, blocked, offcpu, profile, wall};
use crate::model::drill::{Competition, Drill, StorageDrill, Why};
use crate::model::locks::RuntimeLock;
use crate::model::profile::Profile;
use crate::model::verdict::Diagnosis;

/// Seconds a drill-down runs at most (the watch's own length if shorter).
const DRILL_S: f64 = 3.0;
/// The drill-down's CPU profile frequency.
const DRILL_HZ: u64 = 499;
/// The most JVMs of a tree asked for their perf map (each ask starts a
/// jcmd, 0.4 s or more).
const MOST_JVMS: usize = 4;
/// The most CPython processes of a tree whose Python stacks are read.
const MOST_PYTHONS: usize = 4;

/// Run the drill-downs `--why` and the diagnosis call for on `pid` (whose
/// tree is `target`), all at once for one window; None when there are
/// none. With `sweep`, the blocked threads' stacks are read meanwhile, and
/// what they waited in comes back beside the drill-downs.
pub(super) fn drill(
    req: &Request,
    pid: i32,
    d: &Diagnosis,
    target: &[i32],
    sweep: bool,
    (window_s, ended): (f64, std::time::Instant),
    stop: &AtomicBool,
) -> (Option<Why>, Vec<RuntimeLock>) {
    let window = Duration::from_secs_f64(req.duration.min(DRILL_S));
    let drills = match req.why {
        WhyMode::None => return (None, Vec::new()),
        WhyMode::Auto => why::plan(d.verdict, &d.states, false),
        WhyMode::All => why::plan(d.verdict, &d.states, true),
    };
    if drills.is_empty() {
        return (None, Vec::new());
    }
    // In a tree, the members that carry the verdict (never a parent that
    // only waits for them); else the target as given.
    let carriers: Vec<i32> = match d.carriers.as_slice() {
        [] => vec![pid],
        c => c.iter().map(|c| c.pid).collect(),
    };
    let carriers = carriers.as_slice();
    let mut found = Why {
        window_s: window.as_secs_f64(),
        ..Default::default()
    };
    // Root, or the capabilities kdiag-watch.service runs with: perf
    // events and BPF need no more (a drill-down that still cannot run is
    // listed as skipped with its error).
    let root = crate::sys::process::privilege::is_root() || crate::sys::bpf::has_bpf_caps();
    let mut runs = Vec::new();
    for d in drills {
        if stop.load(Ordering::Relaxed) || !crate::instruments::target::exists(pid) {
            found.skipped.push(format!(
                "{}: PID {pid} is gone or kdiag was interrupted",
                d.what()
            ));
        } else if d.needs_root() && !root {
            found.skipped.push(format!(
                "{}: needs root; run: {}",
                d.what(),
                by_hand(req, d, carriers)
            ));
        } else {
            runs.push(d);
        }
    }
    if runs.is_empty() {
        return (Some(found), Vec::new());
    }
    (req.report)(Event::Drilling {
        verdict: d.verdict,
        drills: &runs,
        seconds: window.as_secs_f64(),
    });
    // A JVM's Java frames get names from its perf map: asked for before
    // the stacks are taken, removed (when kdiag made it) once they are named.
    let mut made_maps = Vec::new();
    let named = sweep || runs.iter().any(|d| matches!(d, Drill::Cpu | Drill::Offcpu));
    if req.ask_jvms && named {
        for &p in carriers.iter().take(MOST_JVMS) {
            if let Some((asked, made)) = profile::jvm_perf_map::ask(p, req.scope) {
                found.perf_maps.push(asked);
                made_maps.extend(made);
            }
        }
    }
    found.after_window = Some((window_s, window_s + ended.elapsed().as_secs_f64()));
    // At once: the block requests and the blocking paths are of the same
    // seconds, and the wait is one window whatever the number.
    let mut runtime_locks = Vec::new();
    let mut profiles = Vec::new();
    // The lock sweep reads stacks DWARF-unwound, which stop where a
    // runtime switches stacks (Go's scheduler, under which a goroutine
    // parked on a sync.Mutex leaves its thread asleep); the off-CPU
    // profile's frame-pointer stacks cross it. Recorded for the locks
    // alone when no off-CPU drill-down runs.
    let threads: usize = carriers
        .iter()
        .map(|&p| crate::sys::procfs::tids(p).len())
        .sum();
    let offcpu_for_locks = sweep && root && !runs.contains(&Drill::Offcpu);
    let mut fp_locks = Vec::new();
    let scope = req.scope;
    let results: Vec<(Drill, anyhow::Result<Found>)> = std::thread::scope(|s| {
        let running: Vec<_> = runs
            .iter()
            .map(|&d| {
                (
                    d,
                    s.spawn(move || collect(d, carriers, target, scope, window, stop)),
                )
            })
            .collect();
        let offcpu =
            offcpu_for_locks.then(|| s.spawn(move || offcpu::record_all(carriers, window, stop)));
        // CPython's Python functions, read from its memory meanwhile.
        let pythons: Vec<_> = carriers
            .iter()
            .take(MOST_PYTHONS)
            .filter(|_| named)
            .map(|&p| s.spawn(move || profile::python_stacks::record(p, scope, window, stop)))
            .collect();
        let heat = (req.heat_map && root)
            .then(|| s.spawn(move || wall::record(carriers, DRILL_HZ, window, stop)));
        if sweep && let Ok(w) = blocked::sweep(carriers, window, stop) {
            for (call, p) in w.by_call {
                runtime_locks.extend(locks::attribute(&p, w.thread_samples, Some(call)));
                profiles.push(p);
            }
        }
        if let Some(Ok(Ok((p, _)))) = offcpu.map(|t| t.join()) {
            fp_locks = blocked_locks(&p, window, threads);
        }
        found.python = pythons
            .into_iter()
            .filter_map(|t| t.join().ok().flatten())
            .collect();
        match heat.map(|t| t.join()) {
            Some(Ok(Ok(recorded))) => found.wall = Some(heat_map(carriers, recorded)),
            Some(Ok(Err(e))) => found
                .skipped
                .push(format!("the heat map of when the time went: {e:#}")),
            _ => {}
        }
        running
            .into_iter()
            .map(|(d, t)| {
                let r = t
                    .join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("the drill-down panicked")));
                (d, r)
            })
            .collect()
    });
    for (d, r) in results {
        match r {
            Ok(Found::Cpu(p)) => {
                found.add_cpu(&p);
                profiles.push(p);
            }
            Ok(Found::Offcpu(p)) => {
                found.add_offcpu(&p);
                if sweep {
                    fp_locks = blocked_locks(&p, window, threads);
                }
                profiles.push(p);
            }
            Ok(Found::Storage(s)) => found.storage = Some(s),
            Ok(Found::Sched(c)) => found.competition = Some(c),
            Err(e) => found.skipped.push(format!(
                "{}: {e:#}; run: {}",
                d.what(),
                by_hand(req, d, carriers)
            )),
        }
    }
    // Whichever stacks saw more of the waiting as a lock tell it.
    if locks::lock_share(&fp_locks) > locks::lock_share(&runtime_locks) {
        runtime_locks = fp_locks;
    }
    runtime_locks.sort_by(|a, b| b.share.total_cmp(&a.share).then(a.kind.cmp(&b.kind)));
    drop(made_maps);
    let profiles: Vec<&Profile> = profiles.iter().collect();
    found.unnamed = runtimes::unnamed(&profiles, carriers);
    runtimes::name_python(&mut found, &mut runtime_locks);
    (Some(found), runtime_locks)
}

/// The heat map's wall-clock profile of `carriers`, per thread.
fn heat_map(
    carriers: &[i32],
    (halves, origin_ns, why): (wall::Halves, u64, Option<String>),
) -> crate::model::wall::Wall {
    use crate::analysis::wall::{self as analysis, SLICE_NS};
    use crate::model::wall::OffcpuFrom;
    let merged = analysis::merge(&analysis::Halves {
        cpu: &halves.cpu,
        off: &halves.off,
        waits: halves.waits.as_ref(),
        per_process: false,
        origin_ns,
        slice_ns: SLICE_NS,
    });
    let offcpu = OffcpuFrom::of(
        &halves.collection,
        why.unwrap_or_else(|| "BPF could not attach".into()),
    );
    let pids: Vec<String> = carriers.iter().map(|p| p.to_string()).collect();
    let mut wall = analysis::plain(
        format!("PID {}", pids.join(", ")),
        merged,
        halves.end_ns.saturating_sub(origin_ns),
        SLICE_NS,
        DRILL_HZ,
        offcpu,
    );
    // The heat map's own loss: blocks it cannot place in time.
    wall.lost_ends = halves.lost_ends;
    wall
}

/// The runtime locks an off-CPU profile of `threads` threads over
/// `window` saw, by the time blocked in each.
fn blocked_locks(p: &Profile, window: Duration, threads: usize) -> Vec<RuntimeLock> {
    let total = window.as_nanos() as u64 * threads.max(1) as u64;
    locks::attribute(p, total, None)
}

/// What one drill-down collected.
enum Found {
    Cpu(Profile),
    Offcpu(Profile),
    Storage(StorageDrill),
    Sched(Competition),
}

/// Run one drill-down for `window` on the members that carry the verdict
/// (`carriers`) of the tree `target` (whose CPU competitors are the other
/// processes, named only when in `scope`).
fn collect(
    d: Drill,
    carriers: &[i32],
    target: &[i32],
    scope: Scope,
    window: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<Found> {
    Ok(match d {
        Drill::Cpu => Found::Cpu(profile::sample_all(carriers, DRILL_HZ, window, stop)?),
        Drill::Offcpu => Found::Offcpu(offcpu::record_all(carriers, window, stop)?.0),
        Drill::Storage => {
            let (ios, tier, lost) = block::record(scope, window, stop)?;
            Found::Storage(summary::storage(&ios, carriers, tier.name(), lost))
        }
        Drill::Sched => Found::Sched(competition::record(target, scope, window, stop)?),
        Drill::Exec => anyhow::bail!("exec tracing runs during the watch"),
    })
}

/// The command that runs drill-down `d` by hand: on `pids`; for a command
/// kdiag started (and stops), diagnose again under sudo.
pub(super) fn by_hand(req: &Request, d: Drill, pids: &[i32]) -> String {
    if req.command.is_empty() {
        return d.command_for(pids);
    }
    format!(
        "sudo kdiag diagnose -d {} --why {} -- {}",
        req.duration,
        if req.why == WhyMode::All {
            "all"
        } else {
            "auto"
        },
        words(req.command).join(" ")
    )
}
