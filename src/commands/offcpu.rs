//! `kdiag offcpu`: where the threads of a process, a command or the whole
//! machine wait, and for how long. With BPF: blocked time summed in the
//! kernel by stacks and state, then the top blocking paths, folded stacks
//! and an off-CPU flame graph. Without: a coarse view of wait channels and
//! syscalls sampled from /proc, labelled as such.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::analysis::{fold, offcpu as analysis};
use crate::commands::args::PidList;
use crate::commands::profile::{
    comm_name, comm_of, command_line, self_cpu_secs, utc_now, write_file,
};
use crate::error::{missing, usage};
use crate::instruments::offcpu::fallback::{self, Sampler, Targets};
use crate::instruments::offcpu::{Options, Tracer};
use crate::model::offcpu::{BlockCounts, Collection, Offcpu, StateFilter};
use crate::model::profile::{Profile, WeightUnit};
use crate::model::stacks::StackSet;
use crate::render;
use crate::sys::process::interrupt::Interrupt;
use crate::sys::process::spawn::HeldChild;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Tier {
    /// BPF where the kernel allows it, else the coarse /proc view
    Auto,
    /// sched_switch BPF programs: stacks and exact blocked time
    Bpf,
    /// wait channels and syscalls sampled from /proc every 10 ms, no stacks
    Proc,
}

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
    /// Write folded stacks (`comm;user frames;kernel frames_[k] usecs`)
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    /// Write an off-CPU flame graph (SVG, width = time blocked)
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Write a gzip'd pprof profile, blocked time as the value (go tool pprof, Parca, Pyroscope)
    #[arg(long, value_name = "FILE")]
    pub pprof: Option<PathBuf>,
    /// Write a speedscope JSON profile, blocked time as the weight (speedscope.app, Firefox Profiler)
    #[arg(long, value_name = "FILE")]
    pub speedscope: Option<PathBuf>,
    /// Print the run and its summary as JSON
    #[arg(long)]
    pub json: bool,
    /// Which tier to use
    #[arg(long, value_enum, default_value = "auto")]
    pub tier: Tier,
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
    if args.tier == Tier::Proc && wants_stacks(args) {
        return Err(usage(
            "--svg, --folded, --pprof and --speedscope need stacks, which only the BPF tier \
             records (not --tier proc)",
        ));
    }
    Ok(())
}

/// An output file that needs stacks was asked for.
fn wants_stacks(args: &Args) -> bool {
    args.svg.is_some() || args.folded.is_some() || args.pprof.is_some() || args.speedscope.is_some()
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    validate(&args)?;
    let pids = &args.pids.pids;
    for &pid in pids {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            return Err(crate::error::NoSuchProcess::one(pid));
        }
    }
    let wants_stacks = wants_stacks(&args);
    let interrupt = Interrupt::catch()?;
    let stop = interrupt.stop_flag();

    let mut profile = Profile {
        unit: WeightUnit::Nanoseconds,
        event: "sched_switch".into(),
        ..Default::default()
    };
    // A command is started held, so tracing covers it from its exec.
    let mut child = None;
    let mut tgids: Vec<u32> = pids.iter().map(|&p| p as u32).collect();
    if args.command.is_empty() {
        profile.target = match pids.as_slice() {
            [] => "every process".into(),
            [pid] => format!("PID {pid} ({})", comm_of(*pid)),
            many => format!(
                "PIDs {}",
                many.iter()
                    .map(|p| format!("{p} ({})", comm_of(*p)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
    } else {
        let program = args.command[0].to_string_lossy().into_owned();
        let c =
            HeldChild::spawn(&args.command).with_context(|| format!("cannot start `{program}`"))?;
        tgids.push(c.pid);
        profile.target = command_line(&args.command);
        child = Some(c);
    }
    let options = Options {
        tgids: tgids.clone(),
        follow: !tgids.is_empty(),
        min_block_ns: args.min_block.saturating_mul(1000),
        states: args.state,
    };

    let (mut collector, fallback_reason) = match args.tier {
        Tier::Proc => (Collector::Proc, None),
        Tier::Bpf => match Tracer::start(&options) {
            Ok(t) => (Collector::Bpf(Box::new(t)), None),
            Err(e) => return Err(missing(format!("the BPF tier cannot run here: {e:#}"))),
        },
        Tier::Auto => match Tracer::start(&options) {
            Ok(t) => (Collector::Bpf(Box::new(t)), None),
            Err(e) if wants_stacks => {
                return Err(missing(format!(
                    "--svg, --folded, --pprof and --speedscope need the BPF tier, which cannot \
                     run here: {e:#}; run without them for a coarse view from /proc"
                )));
            }
            Err(e) => (Collector::Proc, Some(format!("{e:#}"))),
        },
    };
    if let Some(why) = &fallback_reason {
        eprintln!("No BPF ({why}); falling back to sampling /proc, without stacks.");
    }
    if let (Some(c), Collector::Bpf(t)) = (&child, &mut collector) {
        t.watch(c.pid, &comm_name(&args.command[0]))?;
    }
    let mut running = match child {
        Some(mut c) => {
            let program = args.command[0].to_string_lossy().into_owned();
            c.release().context("releasing the command")?;
            if let Some(source) = c.exec_error().context("starting the command")? {
                return Err(crate::error::CannotRun {
                    program,
                    error: source,
                }
                .into());
            }
            Running::Child(c)
        }
        None if args.all => Running::All,
        None => Running::Pids(pids.clone()),
    };
    eprintln!("Tracing off-CPU time of {}...", profile.target);

    profile.started = utc_now().0;
    let t0 = Instant::now();
    let cpu0 = self_cpu_secs();
    let until = args.duration.map(|d| t0 + Duration::from_secs_f64(d));
    let mut ended_early = None;
    let mut check_end = |running: &mut Running| match running.ended() {
        Ended::No => false,
        Ended::Normally => true,
        Ended::Early(why) => {
            ended_early = Some(why);
            true
        }
    };
    let (counts, waits, collection) = match collector {
        Collector::Bpf(mut tracer) => {
            loop {
                tracer.poll(Duration::from_millis(100))?;
                if stop.load(Ordering::Relaxed)
                    || until.is_some_and(|u| Instant::now() >= u)
                    || check_end(&mut running)
                {
                    break;
                }
            }
            let attach = tracer.attach().name().to_string();
            profile.cost.wall_secs = t0.elapsed().as_secs_f64();
            profile.cost.kdiag_cpu_secs = self_cpu_secs() - cpu0;
            let post = Instant::now();
            let counts = tracer.finish(&mut profile)?;
            profile.cost.post_secs = post.elapsed().as_secs_f64();
            (counts, None, Collection::Bpf { attach })
        }
        Collector::Proc => {
            let targets = match &running {
                Running::All => Targets::All,
                _ => Targets::Pids {
                    pids: tgids.iter().map(|&p| p as i32).collect(),
                    follow: true,
                },
            };
            let mut sampler = Sampler::new(targets, args.state);
            sampler.run(&stop, until, || check_end(&mut running));
            profile.cost.wall_secs = t0.elapsed().as_secs_f64();
            profile.cost.kdiag_cpu_secs = self_cpu_secs() - cpu0;
            let interval_ms = fallback::INTERVAL.as_millis() as u64;
            (
                BlockCounts::default(),
                Some(sampler.finish()),
                Collection::Proc { interval_ms },
            )
        }
    };
    running.finish();
    profile.ended_early = ended_early;

    let post = Instant::now();
    let summary = analysis::summarize(&profile, TOP);
    let folded = fold::fold(&profile);
    if waits.is_none() && folded.is_empty() {
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
    if let Some(path) = &args.folded {
        let mut text = folded.join("\n");
        text.push('\n');
        write_file(path, text.as_bytes())?;
    }
    if let Some(path) = &args.svg {
        let svg = render::flamegraph::svg(&profile, &folded)?;
        write_file(path, &svg)?;
    }
    if let Some(path) = &args.pprof {
        write_file(path, &render::pprof::gzipped(&StackSet::offcpu(&profile))?)?;
    }
    if let Some(path) = &args.speedscope {
        write_file(
            path,
            &render::speedscope::json(&StackSet::offcpu(&profile))?,
        )?;
    }
    profile.cost.post_secs += post.elapsed().as_secs_f64();
    let offcpu = Offcpu {
        profile,
        collection,
        fallback_reason,
        states: args.state,
        min_block_us: args.min_block,
        counts,
        waits,
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        render::offcpu::json(&mut out, &offcpu, &summary)?;
    } else {
        render::offcpu::text(&mut out, &offcpu, &summary)?;
    }
    // Ctrl-C is how a trace without -d or a command ends.
    let ctrl_c_ends = args.command.is_empty() && args.duration.is_none();
    Ok(interrupt.exit_code(crate::error::OK, ctrl_c_ends))
}

/// The tier at work.
enum Collector {
    Bpf(Box<Tracer>),
    Proc,
}

/// What is traced, while it runs.
enum Running {
    /// `-- CMD`: our child, stopped (if still running) and reaped at the end.
    Child(HeldChild),
    /// `-p PID,...`: over when every one of them has gone.
    Pids(Vec<i32>),
    /// `-a`: until -d or Ctrl-C.
    All,
}

enum Ended {
    No,
    /// The command exited: the run covers all of it.
    Normally,
    /// The processes went away before -d was up.
    Early(String),
}

impl Running {
    fn ended(&mut self) -> Ended {
        match self {
            Running::Child(c) => match c.try_wait() {
                Some(_) => Ended::Normally,
                None => Ended::No,
            },
            Running::Pids(pids) => {
                let alive = pids.iter().any(|&pid| {
                    let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                        .ok()
                        .and_then(|s| s.rfind(')').and_then(|i| s[i + 2..].chars().next()));
                    !matches!(state, None | Some('Z') | Some('X'))
                });
                if alive {
                    Ended::No
                } else if pids.len() == 1 {
                    Ended::Early(format!("PID {} exited during the run", pids[0]))
                } else {
                    Ended::Early("every traced PID exited during the run".into())
                }
            }
            Running::All => Ended::No,
        }
    }

    /// End a command still running (after -d or Ctrl-C) and reap it.
    fn finish(&mut self) {
        if let Running::Child(c) = self {
            c.stop(Duration::from_secs(2));
        }
    }
}
