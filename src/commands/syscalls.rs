//! `kdiag syscalls`: a process's or a command's system calls by name, with
//! their count and time (BPF), or the calls its threads block in (/proc).

use std::ffi::OsString;
use std::time::{Duration, Instant};

use crate::commands::args::PidList;
use crate::error::missing;
use crate::instruments::target::{self, Interrupt, Running};
use crate::instruments::{Ask, Tier, syscalls};
use crate::model::syscalls::Syscalls;
use crate::render;

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
    let pids = &args.pids.pids;
    target::check_pids(pids)?;
    let interrupt = Interrupt::catch()?;
    let mut report = Syscalls::default();
    // A command is started held, so tracing covers it from its exec.
    let child = match args.command.is_empty() {
        true => None,
        false => Some(target::spawn(&args.command)?),
    };
    let mut tgids: Vec<u32> = pids.iter().map(|&p| p as u32).collect();
    tgids.extend(child.as_ref().map(|c| c.pid));
    let (mut source, fallback) =
        syscalls::open(args.tier, &tgids, true).map_err(|e| match args.tier {
            Ask::Only(Tier::Bpf) => missing(format!("the BPF tier cannot run here: {e:#}")),
            _ => e,
        })?;
    report.tier = Some(source.tier());
    if let Some(f) = &fallback {
        eprintln!("{}.", f.note());
        report.notes.push(f.note());
    }
    let mut running = match child {
        Some(c) => {
            report.target = target::command_line(&args.command);
            source.watch(c.pid)?;
            target::release(c, &args.command)?
        }
        None => {
            report.target = crate::instruments::profile::target_name(pids);
            Running::Pids(pids.clone())
        }
    };
    eprintln!("Tracing system calls of {}...", report.target);

    (report.started, _) = target::utc_now();
    let t0 = Instant::now();
    let cpu0 = target::self_cpu_secs();
    let limit = args.duration.map(Duration::from_secs_f64);
    loop {
        source.poll(Duration::from_millis(100))?;
        if interrupt.is_set() || limit.is_some_and(|l| t0.elapsed() >= l) {
            break;
        }
        if running.over(&mut report.ended_early)? {
            break;
        }
    }
    report.cost.wall_secs = t0.elapsed().as_secs_f64();
    report.cost.kdiag_cpu_secs = target::self_cpu_secs() - cpu0;
    let post = Instant::now();
    source.finish(&mut report)?;
    report.sort();
    report.cost.post_secs = post.elapsed().as_secs_f64();
    running.finish(Duration::from_secs(2))?;

    let mut out = std::io::stdout().lock();
    match args.json {
        true => render::syscalls::json(&mut out, &report)?,
        false => render::syscalls::text(&mut out, &report)?,
    }
    let ctrl_c_ends = args.command.is_empty() && args.duration.is_none();
    Ok(interrupt.exit_code(crate::error::OK, ctrl_c_ends))
}
