//! `kdiag diagnose`: watch a process, its process tree, or a command and
//! everything it starts, for a few seconds, and say where the threads'
//! time goes (on CPU, waiting for a CPU, storage, a lock, sleeping by
//! design, stopped) and whether memory grows; with the numbers, the
//! instrument to run next, what each time series did (the trend, drawn as
//! it comes with --live), and what watching cost.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::Context;

use crate::analysis::classify::classify;
use crate::analysis::why::{self, Drill, Why};
use crate::analysis::{drill as summary, exec_failure};
use crate::error::{self, usage};
use crate::instruments::exec::watch::{Watch, watch};
use crate::instruments::exec::{Filter, Spawned};
use crate::instruments::observe::{Options, competition, observe};
use crate::instruments::{block, offcpu, profile};
use crate::model::diagnosis::{Diagnosis, Observation, Scope};
use crate::model::drill::{Competition, ExecDrill};
use crate::model::exec::Exit;
use crate::model::profile::Profile;
use crate::render;
use crate::sys::process::interrupt::Interrupt;
use crate::sys::process::spawn::{self, HeldChild};

/// Observed for less than this, a target that ended gives no verdict.
const TOO_SHORT_S: f64 = 0.2;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The process to diagnose
    #[arg(short = 'p', long = "pid", value_name = "PID", value_parser = super::args::pid::<i32>)]
    pub pid: Option<i32>,
    /// With -p: also every process it starts (and their descendants)
    #[arg(long, requires = "pid")]
    pub tree: bool,
    /// Seconds to watch it (fractions, ms, m and h allowed; at most a week)
    #[arg(
        short = 'd',
        long,
        value_name = "SECS",
        default_value = "5",
        value_parser = super::args::duration
    )]
    pub duration: f64,
    /// Seconds between the points of the time series (default 1, less in
    /// a short window: at least 10 points)
    #[arg(long, value_name = "SECS", value_parser = super::args::interval)]
    pub interval: Option<f64>,
    /// Draw the time series as they arrive (on a terminal); q stops
    /// watching early, and the report follows
    #[arg(long)]
    pub live: bool,
    /// Print the observation and the diagnosis as JSON
    #[arg(long)]
    pub json: bool,
    /// The drill-down after the verdict: the one it calls for (a CPU
    /// profile; an off-CPU profile of where the threads wait, with the
    /// block I/O when they wait for storage; who else has the CPUs), all
    /// of them, or none; failed execs are explained either way. Tracing
    /// needs root (else it prints the command to run)
    #[arg(long, value_enum, default_value = "auto")]
    pub why: WhyMode,
    /// A command to start and diagnose with everything it starts (all
    /// stopped at the end)
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WhyMode {
    None,
    Auto,
    All,
}

/// Seconds a drill-down runs at most (the watch's own length if shorter).
const DRILL_S: f64 = 3.0;
/// The drill-down's CPU profile frequency.
const DRILL_HZ: u64 = 499;

/// The most points a series keeps (a long window gets a longer interval).
const MAX_POINTS: f64 = 20_000.0;

/// The checks on the arguments as a whole (values are checked when parsed).
pub fn validate(args: &Args) -> anyhow::Result<()> {
    if args.pid.is_some() != args.command.is_empty() {
        return Err(usage("say what to diagnose: -p PID, or -- CMD ARGS"));
    }
    if let Some(i) = args.interval {
        let points = args.duration / i;
        let least = crate::analysis::trend::MIN_POINTS;
        if points < least as f64 {
            return Err(usage(format!(
                "--interval {i} s leaves fewer than {least} points in a {} s window: \
                 give a shorter --interval or a longer --duration",
                args.duration
            )));
        }
        if points > MAX_POINTS {
            return Err(usage(format!(
                "--interval {i} s makes more than {MAX_POINTS} points in a {} s window: \
                 give a longer --interval",
                args.duration
            )));
        }
    }
    Ok(())
}

/// Seconds between points: as asked, else 1 s, less in a short window (10
/// points at least, 0.1 s at least), more in a long one (MAX_POINTS).
fn interval(args: &Args) -> f64 {
    args.interval.unwrap_or_else(|| {
        (args.duration / 10.0)
            .clamp(0.1, 1.0)
            .max(args.duration / MAX_POINTS)
    })
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    validate(&args)?;
    if args.live && !(std::io::stdout().is_terminal() && std::io::stdin().is_terminal()) {
        return Err(usage(
            "--live draws on a terminal, and stdin or stdout is not one: \
             drop --live (the report is the same without it)",
        ));
    }
    let interrupt = Interrupt::catch()?;
    let window = Duration::from_secs_f64(args.duration);
    let mut child = None;
    let (pid, scope, execs) = match args.pid {
        Some(pid) => {
            if pid <= 0 || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return Err(error::NoSuchProcess::one(pid));
            }
            (
                pid,
                if args.tree {
                    Scope::Tree
                } else {
                    Scope::Process
                },
                watch_execs(args.why, pid as u32, None),
            )
        }
        None => {
            let program = args.command[0].to_string_lossy().into_owned();
            // Under kdiag's supervisor, the command leads its own process
            // group and its orphans are the supervisor's: all stopped
            // with it.
            // Beside the live view, the command neither gets the terminal
            // nor writes over the view.
            let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
            let options = spawn::Options {
                foreground: !args.live,
                output: args.live.then_some(null.as_raw_fd()),
            };
            let mut c = HeldChild::spawn_with(&args.command, options)
                .with_context(|| format!("cannot start `{program}`"))?;
            let spawned = Spawned {
                pid: c.pid,
                path: c.path.clone(),
                argv: args
                    .command
                    .iter()
                    .map(|a| a.to_string_lossy().into())
                    .collect(),
            };
            let execs = watch_execs(args.why, c.pid, Some(spawned));
            drop(null);
            c.release().context("releasing the command")?;
            if let Some(source) = c.exec_error().context("starting the command")? {
                let exec = exec_drill(&args, c.pid as i32, execs);
                could_not_run(&args, exec.and_then(Result::ok).as_ref());
                return Err(error::CannotRun { program, source }.into());
            }
            let pid = c.pid as i32;
            child = Some(c);
            (pid, Scope::Command, execs)
        }
    };
    let what = if scope == Scope::Process {
        ""
    } else {
        " and its descendants"
    };
    let opts = Options {
        window,
        scope,
        interval: Duration::from_secs_f64(interval(&args)),
        live: None,
    };
    let observed = if args.live {
        observe_live(pid, opts, &interrupt, format!("PID {pid}{what}"))?
    } else {
        if !args.json {
            eprintln!("Watching PID {pid}{what} for {:.1} s ...", args.duration);
        }
        observe(pid, &opts, &interrupt.stop_flag())
    };
    // The drill-down needs the target running: a command is stopped after.
    let verdict = observed
        .as_ref()
        .ok()
        .filter(|o| o.ended.is_none())
        .map(classify);
    let mut why = verdict.as_ref().and_then(|d| {
        let window = Duration::from_secs_f64(args.duration.min(DRILL_S));
        let target: Vec<i32> = observed
            .as_ref()
            .map(|o| o.members.iter().map(|m| m.pid).collect())
            .unwrap_or_default();
        drill(&args, pid, d, &target, window, &interrupt.stop_flag())
    });
    if let Some(c) = child.as_mut() {
        c.stop(Duration::from_secs(2));
    }
    match exec_drill(&args, pid, execs) {
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
            let after = could_not_run(&args, why.as_ref().and_then(|w| w.exec.as_ref()));
            let how = render::exec::exit_text(&Exit::from_status(status.unwrap_or_default()));
            anyhow::bail!("PID {pid} ended after 0.0 s ({how}): {after}");
        }
        observed => observed?,
    };
    if let Some(e) = o.ended.as_mut() {
        e.how = status.map(|s| render::exec::exit_text(&Exit::from_status(s)));
        if e.after_s < TOO_SHORT_S && !interrupt.is_set() {
            let after = could_not_run(&args, why.as_ref().and_then(|w| w.exec.as_ref()));
            anyhow::bail!(
                "PID {pid} ended after {:.1} s{}: {after}",
                e.after_s,
                e.how.as_ref().map_or(String::new(), |h| format!(" ({h})"))
            );
        }
    }
    // Classified before the drill-down when it was still running.
    let d = verdict.unwrap_or_else(|| classify(&o));
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.json {
        render::diagnose::json(&mut out, &o, &d, why.as_ref())?;
    } else {
        render::diagnose::report(&mut out, &o, &d, why.as_ref())?;
    }
    Ok(interrupt.exit_code(error::OK, false))
}

/// Observe on a thread of its own while the live view draws each point it
/// sends; q stops watching early (the drill-down and the report follow),
/// Ctrl-C (a key in raw mode) counts as SIGINT.
fn observe_live(
    pid: i32,
    mut opts: Options,
    interrupt: &Interrupt,
    target: String,
) -> anyhow::Result<anyhow::Result<Observation>> {
    let (tx, rx) = mpsc::channel();
    opts.live = Some(tx);
    let stop = Arc::new(AtomicBool::new(false));
    let state = crate::tui::diagnose::State {
        target,
        window_s: opts.window.as_secs_f64(),
        trend: crate::model::trend::Trend {
            interval_s: opts.interval.as_secs_f64(),
            ..Default::default()
        },
        ..Default::default()
    };
    let observer = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || observe(pid, &opts, &stop))
    };
    let shown = crate::tui::diagnose::show(rx, state, &stop, &|| interrupt.is_set());
    stop.store(true, Ordering::Relaxed);
    let observed = observer
        .join()
        .map_err(|_| anyhow::anyhow!("the observer failed"))?;
    if shown.context("cannot draw on the terminal")?.interrupted {
        interrupt.set(signal_hook::consts::SIGINT);
    }
    Ok(observed)
}

/// Run the drill-downs `--why` and the diagnosis call for on `pid` (whose
/// tree is `target`), all at once for `window`; None when there are none.
fn drill(
    args: &Args,
    pid: i32,
    d: &Diagnosis,
    target: &[i32],
    window: Duration,
    stop: &AtomicBool,
) -> Option<Why> {
    let drills = match args.why {
        WhyMode::None => return None,
        WhyMode::Auto => why::plan(d.verdict, &d.states, false),
        WhyMode::All => why::plan(d.verdict, &d.states, true),
    };
    if drills.is_empty() {
        return None;
    }
    let mut found = Why {
        window_s: window.as_secs_f64(),
        ..Default::default()
    };
    let root = crate::sys::process::privilege::is_root();
    let mut runs = Vec::new();
    for d in drills {
        if stop.load(Ordering::Relaxed) || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            found.skipped.push(format!(
                "{}: PID {pid} is gone or kdiag was interrupted",
                d.what()
            ));
        } else if d.needs_root() && !root {
            found.skipped.push(format!(
                "{}: needs root; run: {}",
                d.what(),
                by_hand(args, d, pid)
            ));
        } else {
            runs.push(d);
        }
    }
    if runs.is_empty() {
        return Some(found);
    }
    if !args.json {
        let what: Vec<&str> = runs.iter().map(|d| d.what()).collect();
        eprintln!(
            "Verdict {}: drilling down for {2:.1} s: {1} ...",
            d.verdict.name(),
            what.join(", "),
            window.as_secs_f64()
        );
    }
    // At once: the block requests and the blocking paths are of the same
    // seconds, and the wait is one window whatever the number.
    let results: Vec<(Drill, anyhow::Result<Found>)> = std::thread::scope(|s| {
        let running: Vec<_> = runs
            .iter()
            .map(|&d| (d, s.spawn(move || collect(d, pid, target, window, stop))))
            .collect();
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
            Ok(Found::Cpu(p)) => found.add_cpu(&p),
            Ok(Found::Offcpu(p)) => found.add_offcpu(&p),
            Ok(Found::Storage(s)) => found.storage = Some(s),
            Ok(Found::Sched(c)) => found.competition = Some(c),
            Err(e) => found.skipped.push(format!(
                "{}: {e:#}; run: {}",
                d.what(),
                by_hand(args, d, pid)
            )),
        }
    }
    Some(found)
}

/// What one drill-down collected.
enum Found {
    Cpu(Profile),
    Offcpu(Profile),
    Storage(crate::model::drill::StorageDrill),
    Sched(Competition),
}

/// Run one drill-down on `pid` (whose tree is `target`) for `window`.
fn collect(
    d: Drill,
    pid: i32,
    target: &[i32],
    window: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<Found> {
    Ok(match d {
        Drill::Cpu => Found::Cpu(profile::sample(pid, DRILL_HZ, window, stop)?),
        Drill::Offcpu => Found::Offcpu(offcpu::record(pid, window, stop)?.0),
        Drill::Storage => {
            let (ios, tier, lost) = block::record(window, stop)?;
            Found::Storage(summary::storage(&ios, target, tier.name(), lost))
        }
        Drill::Sched => Found::Sched(competition::record(target, window, stop)?),
        Drill::Exec => anyhow::bail!("exec tracing runs during the watch"),
    })
}

/// Start tracing the execs of `pid` and all it starts, for the whole
/// watch (`Drill::Exec`): None when not asked for (or, with auto, when
/// not root: a failure then still says what to run).
fn watch_execs(mode: WhyMode, pid: u32, spawned: Option<Spawned>) -> Option<anyhow::Result<Watch>> {
    let root = crate::sys::process::privilege::is_root();
    match mode {
        WhyMode::None => None,
        WhyMode::Auto if !root => None,
        WhyMode::All if !root => Some(Err(anyhow::anyhow!("needs root"))),
        _ => {
            let filter = Filter {
                pid: Some(pid),
                follow_children: true,
                signals: true,
            };
            Some(watch(filter, spawned))
        }
    }
}

/// The exec trace's result: the execs explained as exec-trace explains
/// them, when one failed (or always with --why all); or why it could not
/// run, with the command that would.
fn exec_drill(
    args: &Args,
    pid: i32,
    execs: Option<anyhow::Result<Watch>>,
) -> Option<Result<ExecDrill, String>> {
    let trace = execs?.and_then(Watch::finish);
    match trace {
        Ok(t) => {
            let findings = exec_failure::explain(&t.events, &t.files);
            let e = summary::execs(&t.events, &findings, t.tier.name(), t.lost);
            (args.why == WhyMode::All || !e.failures.is_empty()).then_some(Ok(e))
        }
        Err(e) => Some(Err(format!(
            "{}: {e:#}; run: {}",
            Drill::Exec.what(),
            by_hand(args, Drill::Exec, pid)
        ))),
    }
}

/// The command that runs drill-down `d` by hand: on `pid`; for a command
/// kdiag started (and stops), diagnose again under sudo.
fn by_hand(args: &Args, d: Drill, pid: i32) -> String {
    if args.command.is_empty() {
        return d.command(pid);
    }
    let cmd: Vec<String> = args
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    format!(
        "sudo kdiag diagnose -d {} --why {} -- {}",
        args.duration,
        if args.why == WhyMode::All {
            "all"
        } else {
            "auto"
        },
        cmd.join(" ")
    )
}

/// The command could not run (its exec failed, or it died at once): say
/// why as exec-trace does, or without the trace what to run to see it.
/// Returns the end of the error message that follows.
fn could_not_run(args: &Args, exec: Option<&ExecDrill>) -> &'static str {
    if args.why == WhyMode::None {
        return "nothing to diagnose";
    }
    match exec.filter(|e| !e.failures.is_empty()) {
        Some(e) => {
            let mut out = std::io::stdout().lock();
            let _ = if args.json {
                render::diagnose::json_exec_failure(&mut out, e)
            } else {
                writeln!(out, "Why it could not run:")
                    .and_then(|()| render::drill::exec(&mut out, e))
                    .map_err(Into::into)
            };
            return "an exec failed, as explained above";
        }
        None if args.pid.is_none() && !crate::sys::process::privilege::is_root() => {
            let cmd: Vec<String> = args
                .command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            eprintln!(
                "For why it could not run: sudo kdiag exec-trace -- {}",
                cmd.join(" ")
            );
        }
        None => {}
    }
    "nothing to diagnose"
}
