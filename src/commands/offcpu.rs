//! `kdiag offcpu`: where the threads of a process, a command or the whole
//! machine wait, and for how long. With BPF: blocked time summed in the
//! kernel by stacks and state, then the top blocking paths, folded stacks
//! and an off-CPU flame graph. Without: a coarse view of wait channels and
//! syscalls sampled from /proc, labelled as such.

use std::ffi::OsString;
use std::time::Instant;

use anyhow::bail;

use crate::analysis::{fold, offcpu as analysis};
use crate::commands::args::PidList;
use crate::error::{missing, usage};
use crate::instruments::offcpu::{self, Options};
use crate::instruments::trace::{Aim, Trace};
use crate::instruments::{Ask, Tier};
use crate::model::offcpu::{Offcpu, StateFilter};
use crate::model::profile::{Profile, WeightUnit};
use crate::render;
use crate::render::files::ProfileFiles;
use crate::user_files;

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    sudo kdiag offcpu -- ./server args         where a command's threads wait, until it exits\n  \
    sudo kdiag offcpu -p 4242 -d 10 --svg o.svg   a running process for 10 s, with a flame graph\n  \
    sudo kdiag offcpu -a -d 5 --state d        every uninterruptible wait on the machine")]
pub struct Args {
    #[command(flatten)]
    pub pids: PidList,
    /// Every process on the machine
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Stop after this many seconds (default: when the command or PIDs exit, or Ctrl-C)
    #[arg(short, long, value_name = "SECS", value_parser = super::args::duration)]
    pub duration: Option<f64>,
    /// Keep only blocks at least this long, in microseconds (filtered in the kernel; at most an hour)
    #[arg(long, value_name = "USECS", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(0..=3_600_000_000))]
    pub min_block: u64,
    /// Which blocks to record, by the state the thread blocked in
    #[arg(long, value_enum, default_value = "all")]
    pub state: StateFilter,
    #[command(flatten)]
    pub files: ProfileFiles,
    /// Print the run and its summary as JSON
    #[arg(long)]
    pub json: bool,
    /// Which tier to use
    #[arg(long, default_value = "auto",
          value_parser = super::args::tier(&offcpu::TIERS))]
    pub tier: Ask,
    /// The command to run and trace until it exits
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// Entries in each top list.
const TOP: usize = 15;

/// What clap cannot check alone: one target, stacks only from BPF.
pub fn validate(args: &Args) -> anyhow::Result<()> {
    let pids = &args.pids.pids;
    let kinds = !pids.is_empty() as u8 + args.all as u8 + !args.command.is_empty() as u8;
    if kinds != 1 {
        return Err(usage(
            "say what to trace: one of -p PID,..., -a (every process) or -- CMD ARGS",
        ));
    }
    if args.tier == Ask::Only(Tier::Procfs) && args.files.any() {
        return Err(usage(
            "--svg, --folded, --pprof and --speedscope need stacks, which only the BPF tier \
             records (not --tier proc)",
        ));
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    validate(&args)?;
    let aim = match args.all {
        // -a on a course server: the learner's processes and the children
        // they start, watched in the kernel, never another user's.
        true => Aim::All(super::args::scope()?, "every process"),
        false => Aim::of(&args.pids.pids, &args.command),
    };
    let mut trace = Trace::start(aim, args.duration)?;
    trace.announce = Some("off-CPU time");
    let wants_stacks = args.files.any();
    let (source, fallback) = trace.open(args.tier, |pids| {
        let options = Options {
            tgids: pids.iter().map(|&p| p as u32).collect(),
            follow: !pids.is_empty(),
            min_block_ns: args.min_block.saturating_mul(1000),
            states: args.state,
            per_thread: false,
            wakers: false,
        };
        offcpu::open(args.tier, &options, wants_stacks).map_err(|e| match args.tier {
            Ask::Auto if wants_stacks => missing(format!(
                "--svg, --folded, --pprof and --speedscope need the BPF tier, which cannot \
                 run here: {e:#}; run without them for a coarse view from /proc"
            )),
            _ => e,
        })
    })?;
    let fallback_reason = fallback.map(|f| format!("{:#}", f.error));
    if let Some(why) = &fallback_reason {
        eprintln!("No BPF ({why}); falling back to sampling /proc, without stacks.");
    }
    let mut profile = Profile {
        unit: WeightUnit::Nanoseconds,
        event: "sched_switch".into(),
        ..Default::default()
    };
    let (_, found) = trace.run(source, &mut profile)?;

    let post = Instant::now();
    // The /proc tier has no stacks: its samples are what it measured.
    let summary = match &found.waits {
        Some(waits) => analysis::summarize_waits(waits, TOP),
        None => analysis::summarize(&profile, TOP),
    };
    let folded = fold::fold(&profile);
    if found.waits.is_none() && folded.is_empty() {
        bail!(
            "no blocks of {} were recorded in {:.1} s: its threads did not leave the CPU \
             for {} us or more{} and come back (a thread asleep since before tracing began, and \
             still asleep at the end, is not seen); trace longer (-d) or lower --min-block",
            profile.target,
            profile.cost.wall_secs,
            args.min_block,
            match args.state {
                StateFilter::All => "",
                StateFilter::D => " in state D",
                StateFilter::S => " in state S",
            }
        );
    }
    for (path, data) in args.files.render(&profile, &folded)? {
        user_files::write(path, &data)?;
    }
    profile.cost.post_secs += post.elapsed().as_secs_f64();
    let offcpu = Offcpu {
        profile,
        collection: found.collection,
        fallback_reason,
        states: args.state,
        min_block_us: args.min_block,
        counts: found.counts,
        waits: found.waits,
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        render::offcpu::json(&mut out, &offcpu, &summary)?;
    } else {
        render::offcpu::text(&mut out, &offcpu, &summary)?;
    }
    Ok(trace.exit_code(crate::error::OK))
}
