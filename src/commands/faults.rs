//! `kdiag faults`: page faults of a process or a command, by code path. The
//! result is an ordinary profile weighted by fault counts, so the report,
//! folded stacks, flame graph, pprof and speedscope files are profile's.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use crate::analysis::fold;
use crate::commands::args::PidList;
use crate::error::missing;
use crate::instruments::target::{self, Running};
use crate::instruments::{Ask, Tier, faults};
use crate::model::profile::Profile;
use crate::render;
use crate::render::files::ProfileFiles;
use crate::sys::process::interrupt::Interrupt;
use crate::user_files;

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    sudo kdiag faults -- ./loader big.db       where a command faults pages in, until it exits\n  \
    sudo kdiag faults -p 4242 -d 10 --svg f.svg   a running process for 10 s, with a flame graph")]
pub struct Args {
    #[command(flatten)]
    pub pids: PidList,
    /// Stop after this many seconds (default: when the command or PIDs exit, or Ctrl-C)
    #[arg(short, long, value_name = "SECS", value_parser = super::args::duration)]
    pub duration: Option<f64>,
    #[command(flatten)]
    pub files: ProfileFiles,
    /// Print the profile and its summary as JSON
    #[arg(long)]
    pub json: bool,
    /// Which tier to use
    #[arg(long, default_value = "auto",
          value_parser = super::args::tier(&faults::TIERS))]
    pub tier: Ask,
    /// The command to run and trace until it exits
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// Entries in each top list.
const TOP: usize = 15;

/// What clap cannot check alone: one target.
pub fn validate(args: &Args) -> anyhow::Result<()> {
    args.pids.or_command(&args.command)
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    validate(&args)?;
    let pids = &args.pids.pids;
    target::check_pids(pids)?;
    let interrupt = Interrupt::catch()?;
    let mut profile = Profile::default();
    // A command is started held, so tracing covers it from its exec.
    let child = match args.command.is_empty() {
        true => None,
        false => Some(target::spawn(&args.command)?),
    };
    let mut tgids: Vec<u32> = pids.iter().map(|&p| p as u32).collect();
    tgids.extend(child.as_ref().map(|c| c.pid));
    let (mut source, fallback) =
        faults::open(args.tier, &tgids, true).map_err(|e| match args.tier {
            Ask::Only(Tier::Bpf) => missing(format!("the BPF tier cannot run here: {e:#}")),
            _ => e,
        })?;
    if let Some(f) = &fallback {
        eprintln!("{}.", f.note());
        profile.notes.push(f.note());
    }
    let mut running = match child {
        Some(c) => {
            profile.target = target::command_line(&args.command);
            source.watch(c.pid, &target::comm_name(&args.command[0]))?;
            target::release(c, &args.command)?
        }
        None => {
            profile.target = crate::instruments::profile::target_name(pids);
            Running::Pids(pids.clone())
        }
    };
    eprintln!("Tracing page faults of {}...", profile.target);

    (profile.started, profile.started_unix_ns) = target::utc_now();
    let t0 = Instant::now();
    let cpu0 = target::self_cpu_secs();
    let limit = args.duration.map(Duration::from_secs_f64);
    loop {
        source.poll(Duration::from_millis(100))?;
        if interrupt.is_set() || limit.is_some_and(|l| t0.elapsed() >= l) {
            break;
        }
        if running.over(&mut profile.ended_early)? {
            break;
        }
    }
    profile.cost.wall_secs = t0.elapsed().as_secs_f64();
    profile.cost.kdiag_cpu_secs = target::self_cpu_secs() - cpu0;
    // Tracing ends while a `-- CMD` still lives (the /proc tier reads its
    // last counters); the wait for it to stop is not the report's cost.
    let post = Instant::now();
    source.finish(&mut profile)?;
    profile.cost.post_secs = post.elapsed().as_secs_f64();
    running.finish(Duration::from_secs(2))?;
    let post = Instant::now();

    let summary = fold::summarize(&profile, TOP);
    let folded = fold::fold(&profile);
    let ctrl_c_ends = args.command.is_empty() && args.duration.is_none();
    if folded.is_empty() {
        let why = anyhow::anyhow!("{}", render::flamegraph::no_samples_reason(&profile));
        return Err(interrupt.explain(why, ctrl_c_ends));
    }
    for (path, data) in args.files.render(&profile, &folded)? {
        user_files::write(path, &data)?;
    }
    profile.cost.post_secs += post.elapsed().as_secs_f64();
    let mut out = std::io::stdout().lock();
    if args.json {
        render::profile::json(&mut out, &profile, &summary)?;
    } else {
        render::profile::text(&mut out, &profile, &summary)?;
    }
    Ok(interrupt.exit_code(crate::error::OK, ctrl_c_ends))
}
