//! `kdiag diagnose`: watch a process, its process tree, or a command and
//! everything it starts, for a few seconds, and say where the threads'
//! time goes (on CPU, waiting for a CPU, storage, a lock, sleeping by
//! design, stopped) and whether memory grows; with the numbers, the
//! instrument to run next, what each time series did (the trend, drawn as
//! it comes with --live), and what watching cost.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::Context;

use crate::analysis::classify::classify;
use crate::analysis::why::{self, Drill, Why};
use crate::error::{self, usage};
use crate::instruments::observe::{Options, observe};
use crate::instruments::{offcpu, profile};
use crate::model::diagnosis::{Class, Observation, Scope};
use crate::model::exec::Exit;
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
    /// profile, or an off-CPU profile of where the threads wait), all of
    /// them, or none; needs root (else it prints the command to run)
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
    let (pid, scope) = match args.pid {
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
            drop(null);
            c.release().context("releasing the command")?;
            if let Some(source) = c.exec_error().context("starting the command")? {
                return Err(error::CannotRun { program, source }.into());
            }
            let pid = c.pid as i32;
            child = Some(c);
            (pid, Scope::Command)
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
    let why = verdict.as_ref().and_then(|d| {
        let window = Duration::from_secs_f64(args.duration.min(DRILL_S));
        drill(
            args.why,
            pid,
            d.verdict,
            window,
            &interrupt.stop_flag(),
            args.json,
        )
    });
    if let Some(c) = child.as_mut() {
        c.stop(Duration::from_secs(2));
    }
    // A command that ended within the window ended on its own (its status
    // reaches us from the supervisor, possibly after /proc/PID is gone).
    let status = child.as_ref().and_then(|c| c.ended()).map(|e| e.status);
    let mut o = match observed {
        // The command ended (and its supervisor reaped it) before the
        // first look at /proc.
        Err(_) if status.is_some() => {
            let how = render::exec::exit_text(&Exit::from_status(status.unwrap_or_default()));
            anyhow::bail!("PID {pid} ended after 0.0 s ({how}): nothing to diagnose");
        }
        observed => observed?,
    };
    if let Some(e) = o.ended.as_mut() {
        e.how = status.map(|s| render::exec::exit_text(&Exit::from_status(s)));
        if e.after_s < TOO_SHORT_S && !interrupt.is_set() {
            anyhow::bail!(
                "PID {pid} ended after {:.1} s{}: nothing to diagnose",
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

/// Run the drill-downs `mode` and `verdict` call for on `pid`, each for
/// `window`; None when there are none.
fn drill(
    mode: WhyMode,
    pid: i32,
    verdict: Class,
    window: Duration,
    stop: &AtomicBool,
    quiet: bool,
) -> Option<Why> {
    let drills = match mode {
        WhyMode::None => return None,
        WhyMode::Auto => why::plan(verdict, false),
        WhyMode::All => why::plan(verdict, true),
    };
    if drills.is_empty() {
        return None;
    }
    let mut found = Why {
        window_s: window.as_secs_f64(),
        ..Default::default()
    };
    for d in drills {
        let (what, command) = match d {
            Drill::Cpu => ("CPU profile", format!("sudo kdiag profile -p {pid} -d 5")),
            Drill::Offcpu => (
                "off-CPU profile",
                format!("sudo kdiag offcpu -p {pid} -d 3"),
            ),
        };
        if stop.load(Ordering::Relaxed) || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            found.skipped.push(format!(
                "{what}: PID {pid} is gone or kdiag was interrupted"
            ));
            continue;
        }
        if !quiet {
            eprintln!(
                "Verdict {}: recording a {what} for {:.1} s ...",
                verdict.name(),
                window.as_secs_f64()
            );
        }
        let done = match d {
            Drill::Cpu => profile::sample(pid, DRILL_HZ, window, stop).map(|p| found.add_cpu(&p)),
            Drill::Offcpu => offcpu::record(pid, window, stop).map(|(p, _)| found.add_offcpu(&p)),
        };
        if let Err(e) = done {
            found.skipped.push(format!("{what}: {e:#}; run: {command}"));
        }
    }
    Some(found)
}
