//! `kdiag diagnose`: watch a process, its process tree, or a command and
//! everything it starts, for a few seconds, and say where the threads'
//! time goes (on CPU, waiting for a CPU, storage, a lock, sleeping by
//! design, stopped) and whether memory grows; with the numbers, the
//! instrument to run next, what each time series did (the trend, drawn as
//! it comes with --live), and what watching cost. This file parses the
//! arguments and wires: the output files (opened as the user before the
//! watch), the engine (`crate::diagnose`), the live view (tui/) and the
//! report (render/).

use std::ffi::OsString;
use std::fs::File;
use std::io::IsTerminal;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use anyhow::Context;

use crate::diagnose::{self, Event, Live, MAX_POINTS, Request, WhyMode};
use crate::error::{self, usage};
use crate::instruments::observe::{Options, observe};
use crate::instruments::target::Interrupt;
use crate::model::diagnose_run::DiagnoseRun;
use crate::model::diagnosis::Observation;
use crate::render;
use crate::user_files::{self, Limits};

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
    let cgroup = match (&args.cgroup, &args.unit) {
        (Some(c), _) => Some(super::args::cgroup_dir("--cgroup", c)?),
        (_, Some(u)) => Some(super::args::unit_dir(u)?),
        _ => None,
    };
    // Every file is opened (as the user) before watching: a wrong path
    // fails now, not after the window.
    let (record, files) = open_outputs(&args)?;
    let interrupt = Interrupt::catch()?;
    let live = |pid, opts, target| observe_live(pid, opts, &interrupt, target);
    let request = Request {
        pid: args.pid,
        tree: args.tree,
        cgroup,
        command: &args.command,
        duration: args.duration,
        interval: diagnose::interval(args.duration, args.interval),
        why: args.why,
        report: &|e| say(args.json, e),
        live: args.live.then_some(&live as &Live),
        heat_map: reports(&args)?.iter().any(|(f, _)| *f == Format::Html),
        ask_jvms: true,
        scope: super::args::scope()?,
    };
    let run = match diagnose::run(&request, &interrupt) {
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

/// What the engine says while it runs: progress on stderr (none with
/// --json), and why a command could not run on stdout.
fn say(json: bool, e: Event) {
    match e {
        Event::Watching { pid, what, seconds } if !json => {
            eprintln!("Watching PID {pid}{what} for {seconds:.1} s ...");
        }
        Event::Drilling {
            verdict,
            drills,
            seconds,
        } if !json => {
            let what: Vec<&str> = drills.iter().map(|d| d.what()).collect();
            eprintln!(
                "Thread states say {}: drilling down for {seconds:.1} s: {} ...",
                verdict.name(),
                what.join(", ")
            );
        }
        Event::CouldNotRun(exec) => {
            let mut out = std::io::stdout().lock();
            let _ = if json {
                render::diagnose::json_exec_failure(&mut out, exec)
            } else {
                writeln!(out, "Why it could not run:")
                    .and_then(|()| render::drill::exec(&mut out, exec))
                    .map_err(Into::into)
            };
        }
        Event::SeeWhyWith(command) => eprintln!("For why it could not run: {command}"),
        Event::Watching { .. } | Event::Drilling { .. } => {}
    }
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
