//! `kdiag diagnose`: watch a process, its process tree, or a command and
//! everything it starts, for a few seconds, and say where the threads'
//! time goes (on CPU, waiting for a CPU, storage, a lock, sleeping by
//! design, stopped) and whether memory grows; with the numbers, the
//! instrument to run next, and what watching cost.

use std::ffi::OsString;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;

use crate::analysis::classify::classify;
use crate::error::{self, usage};
use crate::instruments::observe::{Options, observe};
use crate::model::diagnosis::Scope;
use crate::model::exec::Exit;
use crate::render;
use crate::sys::process::spawn::{HeldChild, become_subreaper};

/// Observed for less than this, a target that ended gives no verdict.
const TOO_SHORT_S: f64 = 0.2;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The process to diagnose
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pub pid: Option<i32>,
    /// With -p: also every process it starts (and their descendants)
    #[arg(long, requires = "pid")]
    pub tree: bool,
    /// Seconds to watch it
    #[arg(short = 'd', long, value_name = "SECS", default_value_t = 5.0)]
    pub duration: f64,
    /// Print the observation and the diagnosis as JSON
    #[arg(long)]
    pub json: bool,
    /// A command to start and diagnose with everything it starts (all
    /// stopped at the end)
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    if args.pid.is_some() != args.command.is_empty() {
        return Err(usage("say what to diagnose: -p PID, or -- CMD ARGS"));
    }
    if !(args.duration > 0.0 && args.duration.is_finite()) {
        return Err(usage("-d must be a positive number of seconds"));
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let window = Duration::from_secs_f64(args.duration);
    let mut child = None;
    let (pid, scope) = match args.pid {
        Some(pid) => {
            if pid <= 0 || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                anyhow::bail!("no process with PID {pid}");
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
            // Orphans of the command's tree become kdiag's children: seen
            // as members, and reaped when it stops them.
            become_subreaper().context("becoming the command's subreaper")?;
            let mut c = HeldChild::spawn_group(&args.command)
                .with_context(|| format!("cannot start `{program}`"))?;
            c.release().context("releasing the command")?;
            if let Some(err) = c.exec_error().context("starting the command")? {
                anyhow::bail!("cannot run `{program}`: {err}");
            }
            let pid = c.pid as i32;
            child = Some(c);
            (pid, Scope::Command)
        }
    };
    if !args.json {
        let what = if scope == Scope::Process {
            ""
        } else {
            " and its descendants"
        };
        eprintln!("Watching PID {pid}{what} for {:.1} s ...", args.duration);
    }
    let observed = observe(pid, &Options { window, scope }, &stop);
    // A command that ended on its own within the window says how.
    let status = child.as_mut().and_then(|c| c.try_wait());
    if let Some(c) = child.as_mut() {
        c.stop(Duration::from_secs(2));
    }
    let mut o = observed?;
    if let Some(e) = o.ended.as_mut() {
        e.how = status.map(|s| render::exec::exit_text(&Exit::from_status(s)));
        if e.after_s < TOO_SHORT_S && !stop.load(Ordering::Relaxed) {
            anyhow::bail!(
                "PID {pid} ended after {:.1} s{}: nothing to diagnose",
                e.after_s,
                e.how.as_ref().map_or(String::new(), |h| format!(" ({h})"))
            );
        }
    }
    let d = classify(&o);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.json {
        render::diagnose::json(&mut out, &o, &d)?;
    } else {
        render::diagnose::report(&mut out, &o, &d)?;
    }
    Ok(error::OK)
}
