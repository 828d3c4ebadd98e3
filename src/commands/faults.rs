//! `kdiag faults`: page faults of a process or a command, by code path. The
//! result is an ordinary profile weighted by fault counts, so the report,
//! folded stacks, flame graph, pprof and speedscope files are profile's.

use std::ffi::OsString;
use std::time::Instant;

use crate::analysis::fold;
use crate::commands::args::PidList;
use crate::instruments::trace::{Aim, Trace};
use crate::instruments::{Ask, faults};
use crate::model::profile::Profile;
use crate::render;
use crate::render::files::ProfileFiles;
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
    let mut trace = Trace::start(Aim::of(&args.pids.pids, &args.command), args.duration)?;
    trace.announce = Some("page faults");
    let (source, fallback) = trace.open(args.tier, |pids| faults::open(args.tier, pids, true))?;
    let mut profile = Profile::default();
    if let Some(f) = &fallback {
        eprintln!("{}.", f.note());
        profile.notes.push(f.note());
    }
    trace.run(source, &mut profile)?;

    let post = Instant::now();
    let summary = fold::summarize(&profile, TOP);
    let folded = fold::fold(&profile);
    if folded.is_empty() {
        let why = anyhow::anyhow!("{}", render::flamegraph::no_samples_reason(&profile));
        return Err(trace.explain(why));
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
    Ok(trace.exit_code(crate::error::OK))
}
