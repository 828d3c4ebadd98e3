//! One diagnose run: start the command or check the PID, watch the target
//! for the window (plainly or through the live view), classify, drill down
//! while it still runs, stop the command, explain failed execs, and
//! classify again when the drill-downs changed the picture.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::execs::{could_not_run, exec_drill, watch_execs};
use super::{Event, Request, drill, words};
use crate::analysis::classify::{classify, with_exec_failures};
use crate::analysis::locks;
use crate::error;
use crate::instruments::exec::Spawned;
use crate::instruments::observe::{Options, observe};
use crate::model::diagnose_run::{DiagnoseRun, RunMeta};
use crate::model::diagnosis::{BpfCost, BpfStats, Scope};
use crate::model::drill::Why;
use crate::model::exec::Exit;
use crate::sys::process::interrupt::Interrupt;
use crate::sys::process::spawn::{self, HeldChild};

/// Observed for less than this, a target that ended gives no verdict.
const TOO_SHORT_S: f64 = 0.2;

/// The most points a series keeps (a long window gets a longer interval).
pub const MAX_POINTS: f64 = 20_000.0;

/// Seconds between points: as asked, else 1 s, less in a short window (10
/// points at least, 0.1 s at least), more in a long one (MAX_POINTS).
pub fn interval(duration: f64, asked: Option<f64>) -> f64 {
    asked.unwrap_or_else(|| (duration / 10.0).clamp(0.1, 1.0).max(duration / MAX_POINTS))
}

/// Where and when this run happens.
fn meta() -> RunMeta {
    let read = |f: &str| {
        std::fs::read_to_string(f)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    RunMeta {
        kdiag: env!("CARGO_PKG_VERSION").into(),
        host: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        started: crate::instruments::target::utc_now().0,
    }
}

/// Watch, classify and drill down: the whole run as one value.
pub fn run(req: &Request, interrupt: &Interrupt) -> anyhow::Result<DiagnoseRun> {
    let meta = meta();
    // The BPF programs' run time counts in the cost: measured while held.
    let (stats, _stats_on) = crate::sys::bpf::measure_run_time();
    let window = Duration::from_secs_f64(req.duration);
    let mut child = None;
    // Who stops a command at the end: its signals are no exec failure.
    let mut stoppers = vec![std::process::id()];
    // A cgroup's processes are watched from its first, with every other
    // one and all they start.
    let first = req.cgroup.as_deref().map(|dir| {
        let pids = crate::sys::procfs::pressure::cgroup_pids(dir).unwrap_or_default();
        pids.first().copied().ok_or_else(|| {
            error::usage(format!(
                "{} has no process: nothing to diagnose (give a cgroup with processes in it)",
                dir.display()
            ))
        })
    });
    let (pid, scope, execs) = match req.pid.map(Ok).or(first) {
        Some(pid) => {
            let pid = pid?;
            crate::instruments::target::check_pids(&[pid])?;
            (
                pid,
                if req.cgroup.is_some() {
                    Scope::Cgroup
                } else if req.tree {
                    Scope::Tree
                } else {
                    Scope::Process
                },
                watch_execs(req.why, pid as u32, None),
            )
        }
        None => {
            let program = req.command[0].to_string_lossy().into_owned();
            // Under kdiag's supervisor, the command leads its own process
            // group and its orphans are the supervisor's: all stopped
            // with it.
            // Beside the live view, the command neither gets the terminal
            // nor writes over the view.
            let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
            let live = req.live.is_some();
            let options = spawn::Options {
                foreground: !live,
                output: live.then_some(null.as_raw_fd()),
                identity: None,
            };
            let mut c = HeldChild::spawn_with(req.command, options)
                .with_context(|| format!("cannot start `{program}`"))?;
            let spawned = Spawned {
                pid: c.pid,
                path: c.path.clone(),
                argv: words(req.command),
            };
            let execs = watch_execs(req.why, c.pid, Some(spawned));
            stoppers.extend(c.supervisor_pid());
            drop(null);
            c.release().context("releasing the command")?;
            if let Some(source) = c.exec_error().context("starting the command")? {
                let exec = exec_drill(req, c.pid as i32, execs, &stoppers);
                could_not_run(req, exec.and_then(Result::ok).as_ref());
                return Err(error::CannotRun {
                    program,
                    error: source,
                }
                .into());
            }
            let pid = c.pid as i32;
            child = Some(c);
            (pid, Scope::Command, execs)
        }
    };
    let what = match (&req.cgroup, scope) {
        (Some(dir), _) => format!(" and every process of {}", dir.display()),
        (None, Scope::Process) => String::new(),
        _ => " and its descendants".into(),
    };
    let opts = Options {
        window,
        scope,
        interval: Duration::from_secs_f64(req.interval),
        live: None,
        cgroup: req.cgroup.clone(),
    };
    let observed = match req.live {
        Some(live) => live(pid, opts, format!("PID {pid}{what}"))?,
        None => {
            (req.report)(Event::Watching {
                pid,
                what: &what,
                seconds: req.duration,
            });
            observe(pid, &opts, &interrupt.stop_flag())
        }
    };
    // The drill-downs run after the window: when, from its end.
    let window_ended = (
        observed.as_ref().map_or(0.0, |o| o.window_s),
        Instant::now(),
    );
    // The drill-down needs the target running: a command is stopped after.
    let verdict = observed
        .as_ref()
        .ok()
        .filter(|o| o.ended.is_none())
        .map(classify);
    let mut runtime_locks = Vec::new();
    let mut why = verdict.as_ref().and_then(|d| {
        let target: Vec<i32> = observed
            .as_ref()
            .map(|o| o.members.iter().map(|m| m.pid).collect())
            .unwrap_or_default();
        let sweep = observed.as_ref().is_ok_and(locks::worth_a_look);
        let (why, found) = drill::drill(
            req,
            pid,
            d,
            &target,
            sweep,
            window_ended,
            &interrupt.stop_flag(),
        );
        runtime_locks = found;
        why
    });
    if let Some(c) = child.as_mut() {
        c.stop(Duration::from_secs(2));
    }
    match exec_drill(req, pid, execs, &stoppers) {
        Some(Ok(e)) => why.get_or_insert_with(Why::default).exec = Some(e),
        Some(Err(skipped)) => why.get_or_insert_with(Why::default).skipped.push(skipped),
        None => {}
    }
    // A command that ended within the window ended on its own (its status
    // reaches us from the supervisor, possibly after /proc/PID is gone).
    let status = child.as_ref().and_then(|c| c.ended()).map(|e| e.status);
    let mut o = match observed {
        // The command ended (and its supervisor reaped it) before the
        // first look at /proc.
        Err(_) if status.is_some() => {
            let after = could_not_run(req, why.as_ref().and_then(|w| w.exec.as_ref()));
            let how = Exit::from_status(status.unwrap_or_default());
            anyhow::bail!("PID {pid} ended after 0.0 s ({how}): {after}");
        }
        observed => observed?,
    };
    if let Some(e) = o.ended.as_mut() {
        e.how = status.map(|s| Exit::from_status(s).to_string());
        if e.after_s < TOO_SHORT_S && !interrupt.is_set() {
            let after = could_not_run(req, why.as_ref().and_then(|w| w.exec.as_ref()));
            anyhow::bail!(
                "PID {pid} ended after {:.1} s{}: {after}",
                e.after_s,
                e.how.as_ref().map_or(String::new(), |h| format!(" ({h})"))
            );
        }
    }
    // The cost of everything: the watch, the drill-downs, the exec trace.
    let (cpu_s, max_rss_kib) = crate::sys::process::rusage::own_usage();
    (o.cost.run_cpu_s, o.cost.max_rss_kib) = (Some(cpu_s), max_rss_kib);
    o.cost.bpf = Some(bpf_cost(stats));
    // Classified before the drill-down when it was still running; again
    // when the waiters' stacks showed a runtime's lock where the futex
    // alone looked like a condition.
    let relabelled = locks::relabel(&mut o, &runtime_locks);
    o.runtime_locks = runtime_locks;
    let diagnosis = match verdict {
        Some(d) if !relabelled => d,
        _ => classify(&o),
    };
    let diagnosis = match why.as_ref().and_then(|w| w.exec.as_ref()) {
        Some(exec) => with_exec_failures(diagnosis, exec, pid),
        None => diagnosis,
    };
    Ok(DiagnoseRun {
        meta,
        observation: o,
        diagnosis,
        why,
    })
}

/// The BPF programs the run loaded, all unloaded by now.
fn bpf_cost(stats: crate::sys::bpf::RunTimeStats) -> BpfCost {
    use crate::sys::bpf::RunTimeStats;
    let t = crate::sys::bpf::tally();
    let stats = match stats {
        RunTimeStats::AlreadyOn => BpfStats::AlreadyOn,
        RunTimeStats::TurnedOn => BpfStats::TurnedOn,
        RunTimeStats::Unavailable => BpfStats::Unavailable,
    };
    let measured = stats != BpfStats::Unavailable;
    BpfCost {
        programs: t.programs,
        run_time_ns: measured.then_some(t.run_time_ns),
        runs: measured.then_some(t.runs),
        stats,
        map_bytes: t.map_bytes,
    }
}
