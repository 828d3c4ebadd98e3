//! `kdiag diagnose`: watch one process (or a command it starts) for a few
//! seconds and say what dominates: CPU, waiting for a CPU, storage, a lock,
//! memory growth, or nothing; with the numbers and the instrument to run
//! next.

use std::ffi::OsString;
use std::time::Duration;

use anyhow::Context;

use crate::analysis::classify::classify;
use crate::error::{self, usage};
use crate::instruments::observe::observe;
use crate::model::exec::Exit;
use crate::render;
use crate::sys::process::interrupt::Interrupt;
use crate::sys::process::spawn::HeldChild;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The process to diagnose
    #[arg(short = 'p', long = "pid", value_name = "PID", value_parser = super::args::pid::<i32>)]
    pub pid: Option<i32>,
    /// Seconds to watch it (fractions, ms, m and h allowed; at most a week)
    #[arg(
        short = 'd',
        long,
        value_name = "SECS",
        default_value = "5",
        value_parser = super::args::duration
    )]
    pub duration: f64,
    /// Print the observation and the diagnosis as JSON
    #[arg(long)]
    pub json: bool,
    /// A command to start and diagnose (stopped at the end)
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// The checks on the arguments as a whole (values are checked when parsed).
pub fn validate(args: &Args) -> anyhow::Result<()> {
    if args.pid.is_some() != args.command.is_empty() {
        return Err(usage("say what to diagnose: -p PID, or -- CMD ARGS"));
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    validate(&args)?;
    let interrupt = Interrupt::catch()?;
    let window = Duration::from_secs_f64(args.duration);
    let mut child = None;
    let pid = match args.pid {
        Some(pid) => {
            if pid <= 0 || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return Err(error::NoSuchProcess::one(pid));
            }
            pid
        }
        None => {
            let program = args.command[0].to_string_lossy().into_owned();
            let mut c = HeldChild::spawn(&args.command)
                .with_context(|| format!("cannot start `{program}`"))?;
            c.release().context("releasing the command")?;
            if let Some(source) = c.exec_error().context("starting the command")? {
                return Err(error::CannotRun { program, source }.into());
            }
            let pid = c.pid as i32;
            child = Some(c);
            pid
        }
    };
    if !args.json {
        eprintln!("Watching PID {pid} for {:.1} s ...", args.duration);
    }
    let observed = observe(pid, window, &interrupt.stop_flag());
    if let Some(c) = child.as_mut() {
        c.stop(Duration::from_secs(2));
    }
    // A command that ended within the window ended on its own (its status
    // reaches us from the supervisor, possibly after /proc/PID is gone).
    let ended = child.as_ref().and_then(|c| c.ended()).map(|e| e.status);
    let o = observed?;
    // Too short a look gives no verdict worth having.
    if o.window_s < (args.duration / 2.0).min(0.5) && !interrupt.is_set() {
        let how = ended.map_or(String::new(), |s| {
            format!(" ({})", render::exec::exit_text(&Exit::from_status(s)))
        });
        anyhow::bail!(
            "PID {pid} ended after {:.1} s{how}: nothing to diagnose",
            o.window_s
        );
    }
    let d = classify(&o);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.json {
        render::json(
            &mut out,
            &serde_json::json!({"observation": o, "diagnosis": d}),
        )?;
    } else {
        render::diagnose::report(&mut out, &o, &d)?;
    }
    Ok(interrupt.exit_code(error::OK, false))
}
