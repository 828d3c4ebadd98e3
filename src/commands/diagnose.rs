//! `kdiag diagnose`: watch a process, its process tree, or a command and
//! everything it starts, for a few seconds, and say where the threads'
//! time goes (on CPU, waiting for a CPU, storage, a lock, sleeping by
//! design, stopped) and whether memory grows; with the numbers, the
//! instrument to run next, what each time series did (the trend, drawn as
//! it comes with --live), and what watching cost.

use std::ffi::OsString;
use std::fs::File;
use std::io::IsTerminal;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::Context;

use crate::analysis::classify::{classify, with_exec_failures};
use crate::analysis::why::{self, Drill};
use crate::analysis::{drill as summary, exec_failure, locks};
use crate::error::{self, usage};
use crate::instruments::exec::watch::{Watch, watch};
use crate::instruments::exec::{Filter, Spawned};
use crate::instruments::observe::{Options, competition, observe};
use crate::instruments::{block, blocked, offcpu, profile};
use crate::model::diagnose_run::{DiagnoseRun, RunMeta};
use crate::model::diagnosis::{Diagnosis, Observation, Scope};
use crate::model::drill::Why;
use crate::model::drill::{Competition, ExecDrill};
use crate::model::exec::Exit;
use crate::model::locks::RuntimeLock;
use crate::model::profile::Profile;
use crate::render;
use crate::sys::process::interrupt::Interrupt;
use crate::sys::process::spawn::{self, HeldChild};
use crate::sys::process::user_files::{self, Limits};

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
    /// Every process of a cgroup (a directory under /sys/fs/cgroup, or its
    /// path there, e.g. cpu/system.slice/nginx.service) and below, as a tree
    // A cgroup, not a user's file: kdiag reads the kernel's cgroup.procs
    // under /sys/fs/cgroup only (args::cgroup_dir), never a path's contents.
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::Other, conflicts_with_all = ["pid", "command"])]
    pub cgroup: Option<PathBuf>,
    /// Every process of a systemd unit (nginx, nginx.service,
    /// session-2.scope), its cgroup found by name in the cgroup trees
    #[arg(long, value_name = "NAME", conflicts_with_all = ["pid", "command", "cgroup"])]
    pub unit: Option<String>,
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
    /// Save everything this run found (observation, diagnosis,
    /// drill-downs) to FILE, for --replay (docs/diagnose.md, "Record format")
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Show the report of a run saved with --record again (no process is
    /// watched; any machine, no root)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["pid", "tree", "cgroup", "unit", "command", "record", "live", "interval"])]
    pub replay: Option<PathBuf>,
    /// Also write the report to FILE as text, json or html (one
    /// self-contained page with charts and flame graphs); repeatable
    #[arg(long, num_args = 2, value_names = ["FORMAT", "FILE"], value_hint = clap::ValueHint::FilePath)]
    pub report: Vec<OsString>,
    /// A command to start and diagnose with everything it starts (all
    /// stopped at the end)
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// A report's format (`--report FORMAT FILE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Html,
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
    let targets = [
        args.pid.is_some(),
        args.cgroup.is_some(),
        args.unit.is_some(),
        !args.command.is_empty(),
    ];
    if args.replay.is_none() && targets.iter().filter(|&&t| t).count() != 1 {
        return Err(usage(
            "say what to diagnose: -p PID, --cgroup PATH, --unit NAME, or -- CMD ARGS (or --replay FILE)",
        ));
    }
    let mut files: Vec<&Path> = args.record.iter().map(PathBuf::as_path).collect();
    files.extend(reports(args)?.into_iter().map(|(_, p)| p));
    files.extend(args.replay.as_deref());
    for (i, f) in files.iter().enumerate() {
        if files[..i].contains(f) {
            return Err(usage(format!(
                "{} is named twice: give each record and report a file of its own",
                f.display()
            )));
        }
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

/// The `--report FORMAT FILE` pairs.
fn reports(args: &Args) -> anyhow::Result<Vec<(Format, &Path)>> {
    args.report
        .chunks(2)
        .map(|pair| {
            let format = match pair[0].to_str() {
                Some("text") => Format::Text,
                Some("json") => Format::Json,
                Some("html") => Format::Html,
                _ => {
                    return Err(usage(format!(
                        "--report FORMAT FILE: FORMAT is text, json or html, not `{}`",
                        pair[0].to_string_lossy()
                    )));
                }
            };
            let file = pair
                .get(1)
                .ok_or_else(|| usage("--report FORMAT FILE: name the file"))?;
            Ok((format, Path::new(file)))
        })
        .collect()
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    validate(&args)?;
    if args.live && !(std::io::stdout().is_terminal() && std::io::stdin().is_terminal()) {
        return Err(usage(
            "--live draws on a terminal, and stdin or stdout is not one: \
             drop --live (the report is the same without it)",
        ));
    }
    if let Some(path) = &args.replay {
        let run = replay(path)?;
        let (_, files) = open_outputs(&args)?;
        show(&args, &run, files)?;
        return Ok(error::OK);
    }
    // Every file is opened (as the user) before watching: a wrong path
    // fails now, not after the window.
    let (record, files) = open_outputs(&args)?;
    let interrupt = Interrupt::catch()?;
    let run = match watch_and_drill(&args, &interrupt) {
        Ok(run) => run,
        Err(e) => {
            // Nothing to record or report: leave no empty file behind.
            let named: Vec<&Path> = files.iter().map(|f| f.1).collect();
            drop((record, files));
            remove(&named);
            remove(&args.record.iter().map(PathBuf::as_path).collect::<Vec<_>>());
            return Err(e);
        }
    };
    if let (Some(mut file), Some(path)) = (record, &args.record) {
        file.write_all(run.to_record().as_bytes())
            .and_then(|()| file.flush())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    show(&args, &run, files)?;
    Ok(interrupt.exit_code(error::OK, false))
}

type Outputs<'a> = (Option<File>, Vec<(Format, &'a Path, File)>);

/// The record and report files, opened for writing as the user (never
/// following a symbolic link, never created as root); when one cannot be,
/// those already opened (empty, the user's own) are removed again.
fn open_outputs(args: &Args) -> anyhow::Result<Outputs<'_>> {
    // The record first (no format), then the reports.
    let mut wanted: Vec<(Option<Format>, &Path)> =
        args.record.iter().map(|p| (None, p.as_path())).collect();
    wanted.extend(reports(args)?.into_iter().map(|(f, p)| (Some(f), p)));
    let (mut record, mut files, mut opened) = (None, Vec::new(), Vec::new());
    for (format, path) in wanted {
        let file = match user_files::create(path) {
            Ok(file) => file,
            Err(e) => {
                remove(&opened);
                return Err(e.into());
            }
        };
        opened.push(path);
        match format {
            None => record = Some(file),
            Some(f) => files.push((f, path, file)),
        }
    }
    Ok((record, files))
}

/// Remove files kdiag opened for the user, as the user: after a failure.
fn remove(paths: &[&Path]) {
    for path in paths {
        let _ = user_files::remove_file(path);
    }
}

/// A recorded run, read as the user.
fn replay(path: &Path) -> anyhow::Result<DiagnoseRun> {
    // A record with its flame graphs' stacks is far over the default input
    // limit; still bounded.
    let text = user_files::read_to_string(path, &Limits::input().max(MAX_RECORD_BYTES))?;
    Ok(DiagnoseRun::from_record(&text).map_err(|e| e.in_file(path))?)
}

/// The largest record `--replay` reads.
const MAX_RECORD_BYTES: u64 = 256 << 20;

/// The report on stdout (text, or the JSON document), and each `--report`.
fn show(args: &Args, run: &DiagnoseRun, files: Vec<(Format, &Path, File)>) -> anyhow::Result<()> {
    for (format, path, mut file) in files {
        let mut buf = Vec::new();
        write_report(&mut buf, format, run)?;
        file.write_all(&buf)
            .and_then(|()| file.flush())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let stdout = std::io::stdout();
    let format = if args.json {
        Format::Json
    } else {
        Format::Text
    };
    write_report(&mut stdout.lock(), format, run)
}

/// One run in one format.
pub fn write_report(out: &mut impl Write, format: Format, run: &DiagnoseRun) -> anyhow::Result<()> {
    let (o, d, why) = (&run.observation, &run.diagnosis, run.why.as_ref());
    match format {
        Format::Text => render::diagnose::report(out, o, d, why)?,
        Format::Json => render::diagnose::json(out, o, d, why)?,
        Format::Html => render::html::diagnose(out, run)?,
    }
    Ok(())
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
fn watch_and_drill(args: &Args, interrupt: &Interrupt) -> anyhow::Result<DiagnoseRun> {
    let meta = meta();
    let window = Duration::from_secs_f64(args.duration);
    let mut child = None;
    // Who stops a command at the end: its signals are no exec failure.
    let mut stoppers = vec![std::process::id()];
    let cgroup = match (&args.cgroup, &args.unit) {
        (Some(c), _) => Some(super::args::cgroup_dir("--cgroup", c)?),
        (_, Some(u)) => Some(super::args::unit_dir(u)?),
        _ => None,
    };
    // A cgroup's processes are watched from its first, with every other
    // one and all they start.
    let first = cgroup.as_deref().map(|dir| {
        let pids = crate::sys::procfs::pressure::cgroup_pids(dir).unwrap_or_default();
        pids.first().copied().ok_or_else(|| {
            usage(format!(
                "{} has no process: nothing to diagnose (give a cgroup with processes in it)",
                dir.display()
            ))
        })
    });
    let (pid, scope, execs) = match args.pid.map(Ok).or(first) {
        Some(pid) => {
            let pid = pid?;
            if pid <= 0 || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return Err(error::NoSuchProcess::one(pid));
            }
            (
                pid,
                if cgroup.is_some() {
                    Scope::Cgroup
                } else if args.tree {
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
                argv: words(&args.command),
            };
            let execs = watch_execs(args.why, c.pid, Some(spawned));
            stoppers.extend(c.supervisor_pid());
            drop(null);
            c.release().context("releasing the command")?;
            if let Some(source) = c.exec_error().context("starting the command")? {
                let exec = exec_drill(args, c.pid as i32, execs, &stoppers);
                could_not_run(args, exec.and_then(Result::ok).as_ref());
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
    let what = match (&cgroup, scope) {
        (Some(dir), _) => format!(" and every process of {}", dir.display()),
        (None, Scope::Process) => String::new(),
        _ => " and its descendants".into(),
    };
    let opts = Options {
        window,
        scope,
        interval: Duration::from_secs_f64(interval(args)),
        live: None,
        cgroup,
    };
    let observed = if args.live {
        observe_live(pid, opts, interrupt, format!("PID {pid}{what}"))?
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
    let mut runtime_locks = Vec::new();
    let mut why = verdict.as_ref().and_then(|d| {
        let window = Duration::from_secs_f64(args.duration.min(DRILL_S));
        let target: Vec<i32> = observed
            .as_ref()
            .map(|o| o.members.iter().map(|m| m.pid).collect())
            .unwrap_or_default();
        let sweep = observed.as_ref().is_ok_and(locks::worth_a_look);
        let (why, found) = drill(args, pid, d, &target, sweep, window, &interrupt.stop_flag());
        runtime_locks = found;
        why
    });
    if let Some(c) = child.as_mut() {
        c.stop(Duration::from_secs(2));
    }
    match exec_drill(args, pid, execs, &stoppers) {
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
            let after = could_not_run(args, why.as_ref().and_then(|w| w.exec.as_ref()));
            let how = render::exec::exit_text(&Exit::from_status(status.unwrap_or_default()));
            anyhow::bail!("PID {pid} ended after 0.0 s ({how}): {after}");
        }
        observed => observed?,
    };
    if let Some(e) = o.ended.as_mut() {
        e.how = status.map(|s| render::exec::exit_text(&Exit::from_status(s)));
        if e.after_s < TOO_SHORT_S && !interrupt.is_set() {
            let after = could_not_run(args, why.as_ref().and_then(|w| w.exec.as_ref()));
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
/// With `sweep`, the blocked threads' stacks are read meanwhile, and what
/// they waited in comes back beside the drill-downs.
fn drill(
    args: &Args,
    pid: i32,
    d: &Diagnosis,
    target: &[i32],
    sweep: bool,
    window: Duration,
    stop: &AtomicBool,
) -> (Option<Why>, Vec<RuntimeLock>) {
    let drills = match args.why {
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
                by_hand(args, d, carriers)
            ));
        } else {
            runs.push(d);
        }
    }
    if runs.is_empty() {
        return (Some(found), Vec::new());
    }
    if !args.json {
        let what: Vec<&str> = runs.iter().map(|d| d.what()).collect();
        eprintln!(
            "Thread states say {}: drilling down for {2:.1} s: {1} ...",
            d.verdict.name(),
            what.join(", "),
            window.as_secs_f64()
        );
    }
    // At once: the block requests and the blocking paths are of the same
    // seconds, and the wait is one window whatever the number.
    let mut runtime_locks = Vec::new();
    let results: Vec<(Drill, anyhow::Result<Found>)> = std::thread::scope(|s| {
        let running: Vec<_> = runs
            .iter()
            .map(|&d| {
                (
                    d,
                    s.spawn(move || collect(d, carriers, target, window, stop)),
                )
            })
            .collect();
        if sweep && let Ok(w) = blocked::sweep(carriers, window, stop) {
            runtime_locks = locks::attribute(&w.profile, w.thread_samples);
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
            Ok(Found::Cpu(p)) => found.add_cpu(&p),
            Ok(Found::Offcpu(p)) => found.add_offcpu(&p),
            Ok(Found::Storage(s)) => found.storage = Some(s),
            Ok(Found::Sched(c)) => found.competition = Some(c),
            Err(e) => found.skipped.push(format!(
                "{}: {e:#}; run: {}",
                d.what(),
                by_hand(args, d, carriers)
            )),
        }
    }
    (Some(found), runtime_locks)
}

/// What one drill-down collected.
enum Found {
    Cpu(Profile),
    Offcpu(Profile),
    Storage(crate::model::drill::StorageDrill),
    Sched(Competition),
}

/// Run one drill-down for `window` on the members that carry the verdict
/// (`carriers`) of the tree `target` (whose CPU competitors are the other
/// processes).
fn collect(
    d: Drill,
    carriers: &[i32],
    target: &[i32],
    window: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<Found> {
    Ok(match d {
        Drill::Cpu => Found::Cpu(profile::sample_all(carriers, DRILL_HZ, window, stop)?),
        Drill::Offcpu => Found::Offcpu(offcpu::record_all(carriers, window, stop)?.0),
        Drill::Storage => {
            let (ios, tier, lost) = block::record(window, stop)?;
            Found::Storage(summary::storage(&ios, carriers, tier.name(), lost))
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
/// them (leaving out kdiag's own stopping of the command, by `stoppers`),
/// when one failed (or always with --why all); or why it could not run,
/// with the command that would.
fn exec_drill(
    args: &Args,
    pid: i32,
    execs: Option<anyhow::Result<Watch>>,
    stoppers: &[u32],
) -> Option<Result<ExecDrill, String>> {
    let trace = execs?.and_then(Watch::finish);
    match trace {
        Ok(t) => {
            let findings = exec_failure::explain(&t.events, &t.files);
            let findings = exec_failure::not_stopped_by(findings, &t.events, stoppers);
            let e = summary::execs(&t.events, &findings, t.tier.name(), t.lost);
            (args.why == WhyMode::All || !e.failures.is_empty()).then_some(Ok(e))
        }
        Err(e) => Some(Err(format!(
            "{}: {e:#}; run: {}",
            Drill::Exec.what(),
            by_hand(args, Drill::Exec, &[pid])
        ))),
    }
}

/// The command that runs drill-down `d` by hand: on `pids`; for a command
/// kdiag started (and stops), diagnose again under sudo.
fn by_hand(args: &Args, d: Drill, pids: &[i32]) -> String {
    if args.command.is_empty() {
        return d.command_for(pids);
    }
    format!(
        "sudo kdiag diagnose -d {} --why {} -- {}",
        args.duration,
        if args.why == WhyMode::All {
            "all"
        } else {
            "auto"
        },
        words(&args.command).join(" ")
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
        None if !args.command.is_empty() && !crate::sys::process::privilege::is_root() => {
            eprintln!(
                "For why it could not run: sudo kdiag exec-trace -- {}",
                words(&args.command).join(" ")
            );
        }
        None => {}
    }
    "nothing to diagnose"
}

/// A command's words as text.
fn words(argv: &[OsString]) -> Vec<String> {
    argv.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}
