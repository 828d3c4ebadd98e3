//! `kdiag syscalls`: a process's or a command's system calls by name, with
//! their count and time (BPF), or the calls its threads block in (/proc).

use crate::commands::args::PidList;
use crate::instruments::trace::{Aim, Trace};
use crate::instruments::{Ask, syscalls};
use crate::model::syscalls::Syscalls;
use crate::render;
use std::ffi::OsString;

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    sudo kdiag syscalls -- ./loader big.db    a command's calls, until it exits\n  \
    sudo kdiag syscalls -p 4242 -d 10         a running process for 10 s")]
pub struct Args {
    #[command(flatten)]
    pub pids: PidList,
    /// Stop after this many seconds (default: when the command or PIDs exit, or Ctrl-C)
    #[arg(short, long, value_name = "SECS", value_parser = super::args::duration)]
    pub duration: Option<f64>,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
    /// Which tier to use
    #[arg(long, default_value = "auto",
          value_parser = super::args::tier(&syscalls::TIERS))]
    pub tier: Ask,
    /// The command to run and trace until it exits
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// What clap cannot check alone: one target.
pub fn validate(args: &Args) -> anyhow::Result<()> {
    args.pids.or_command(&args.command)
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    validate(&args)?;
    let mut trace = Trace::start(Aim::of(&args.pids.pids, &args.command), args.duration)?;
    trace.announce = Some("system calls");
    let (source, fallback) = trace.open(args.tier, |pids| syscalls::open(args.tier, pids, true))?;
    let mut report = Syscalls {
        tier: Some(source.tier()),
        ..Syscalls::default()
    };
    if let Some(f) = &fallback {
        eprintln!("{}.", f.note());
        report.notes.push(f.note());
    }
    trace.run(source, &mut report)?;
    report.sort();

    let mut out = std::io::stdout().lock();
    match args.json {
        true => render::syscalls::json(&mut out, &report)?,
        false => render::syscalls::text(&mut out, &report)?,
    }
    Ok(trace.exit_code(crate::error::OK))
}
