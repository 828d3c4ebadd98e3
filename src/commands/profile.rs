//! `kdiag profile`: sample CPU stacks of a process, a command or every CPU,
//! then print the top functions and hottest stacks, and write folded stacks,
//! a flame graph, pprof or speedscope files.
//!
//! Stages: record (sys::perf, drained into the recorder) → unwind
//! (instruments::profile::unwind, per sample as drained, for
//! `--call-graph dwarf|auto`) → symbolize (at the end) → fold and render.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use crate::analysis::fold;
use crate::analysis::wall::SLICE_NS;
use crate::error::usage;
use crate::instruments::profile::unwind::{self, CallGraph};
use crate::instruments::profile::{self, Request};
use crate::instruments::trace::{Aim, Trace};
use crate::instruments::{Ask, wall};
use crate::model::profile::{ProbeCost, Profile};
use crate::model::wall as wall_model;
use crate::render;
use crate::render::files::ProfileFiles;
use crate::user_files;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Profile this process (its threads and the children it starts)
    #[arg(short, long, value_name = "PID", value_parser = super::args::pid::<i32>)]
    pub pid: Option<i32>,
    /// Profile every CPU (system-wide)
    #[arg(short = 'a', long)]
    pub all_cpus: bool,
    /// Samples per second per CPU
    #[arg(
        short = 'F',
        long = "freq",
        value_name = "HZ",
        default_value = "99",
        value_parser = super::args::frequency
    )]
    pub freq: u64,
    /// Stop after this many seconds (default: when the command or PID exits, or Ctrl-C)
    #[arg(short, long, value_name = "SECS", value_parser = super::args::duration)]
    pub duration: Option<f64>,
    /// Keep only user-space frames and samples
    #[arg(long, conflicts_with = "kernel_only")]
    pub user_only: bool,
    /// Keep only kernel frames and samples
    #[arg(long)]
    pub kernel_only: bool,
    /// Keep the idle task's samples (left out system-wide by default)
    #[arg(long)]
    pub include_idle: bool,
    /// How to walk user stacks: fp (frame pointers), dwarf (copy the stack, unwind from
    /// .eh_frame), auto (frame pointers where the code keeps them, DWARF elsewhere)
    #[arg(long, value_enum, value_name = "MODE", default_value_t = CallGraph::Fp)]
    pub call_graph: CallGraph,
    /// Bytes of user stack copied per sample for dwarf/auto (multiple of 8, at most 65528)
    #[arg(long, value_name = "BYTES", default_value_t = unwind::DEFAULT_STACK_SIZE as u64)]
    pub stack_size: u64,
    /// Wall-clock profile: every thread's time on the CPU (sampled) and off it (blocked, by
    /// stack and kind: run-queue, storage, lock, sleep, wait), in one unit; -p PID or -- CMD
    #[arg(long)]
    pub wall: bool,
    /// With --wall: one root per process instead of one per thread
    #[arg(long, requires = "wall")]
    pub per_process: bool,
    /// With --wall: leave out who woke each lock, sleep and wait (the BPF tier pairs every
    /// sleep with its waker's stack: one more program, on sched_waking)
    #[arg(long, requires = "wall")]
    pub no_wakers: bool,
    /// With --wall: write an HTML page (self-contained) with a heat map of when each thread's
    /// time went; selecting a range in it draws the flame graph of that range
    #[arg(long, value_name = "FILE", requires = "wall")]
    pub html: Option<std::path::PathBuf>,
    /// With --wall: where off-CPU time comes from
    #[arg(long, default_value = "auto",
          value_parser = super::args::tier(&crate::instruments::offcpu::TIERS))]
    pub tier: Ask,
    #[command(flatten)]
    pub files: ProfileFiles,
    /// Print the profile as JSON
    #[arg(long)]
    pub json: bool,
    /// The command to run and profile until it exits
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// How many entries each top list keeps.
const TOP: usize = 15;

/// The checks on the arguments as a whole (values are checked when parsed).
pub fn validate(args: &Args) -> anyhow::Result<()> {
    let targets = args.pid.is_some() as u8 + args.all_cpus as u8 + !args.command.is_empty() as u8;
    if targets != 1 {
        return Err(usage(
            "say what to profile: one of -p PID, -a (all CPUs) or -- CMD ARGS",
        ));
    }
    unwind::check_stack_size(args.stack_size).map_err(usage)?;
    if args.wall {
        if args.all_cpus {
            return Err(usage(
                "--wall profiles the threads of -p PID or -- CMD, not every CPU",
            ));
        }
        if args.user_only || args.kernel_only || args.include_idle {
            return Err(usage(
                "--wall keeps whole stacks of the target's threads: drop --user-only, \
                 --kernel-only and --include-idle",
            ));
        }
        if args.call_graph != CallGraph::Fp {
            return Err(usage(
                "--wall walks stacks by frame pointers (as the off-CPU half does): drop --call-graph",
            ));
        }
    } else if args.tier != Ask::Auto {
        return Err(usage("--tier chooses --wall's off-CPU source: add --wall"));
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    validate(&args)?;
    let aim = match (args.all_cpus, &args.pid) {
        // -a on a course server: the learner's processes (and the children
        // they start), one event per task, never another user's.
        (true, _) => Aim::All(super::args::scope()?, "all CPUs"),
        (false, pid) => Aim::of(pid.as_slice(), &args.command),
    };
    let mut trace = Trace::start(aim, args.duration)?;
    if args.wall {
        return run_wall(args, trace);
    }
    let stack_size = unwind::check_stack_size(args.stack_size).map_err(usage)?;
    let copies_stack = args.call_graph.copies_stack() && !args.kernel_only;
    let mut profile = Profile {
        call_graph: format!("{:?}", args.call_graph).to_lowercase(),
        stack_size: copies_stack.then_some(stack_size),
        ..Default::default()
    };
    let request = Request {
        freq: args.freq,
        cycles: true,
        call_graph: args.call_graph,
        stack_size: profile.stack_size,
        user_only: args.user_only,
        kernel_only: args.kernel_only,
        include_idle: args.include_idle,
        // The events switch on by themselves when the held command execs.
        on_exec: !args.command.is_empty(),
        per_thread: false,
    };
    trace.measure_busy = true;
    let sampler = trace.open(Ask::Auto, |pids| profile::open_on(request, pids))?;
    trace.run(Box::new(sampler), &mut profile)?;

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
    Ok(trace.exit_code(trace.own_exit()))
}

/// `--wall`: both halves opened together on the target, merged into one
/// profile in nanoseconds, reported per thread (or process).
fn run_wall(args: Args, mut trace: Trace) -> anyhow::Result<u8> {
    // The BPF programs' run time is part of the cost.
    trace.measure_bpf = true;
    let on_exec = !args.command.is_empty();
    let mut recording = trace.open(args.tier, |pids| {
        wall::open(args.tier, pids, args.freq, on_exec, !args.no_wakers)
    })?;
    if let Some(f) = &recording.fallback {
        eprintln!(
            "No BPF ({:#}); off-CPU time comes from /proc, without stacks.",
            f.error
        );
    }
    let fallback = recording.fallback.take().map(|f| format!("{:#}", f.error));
    let (run, halves) = trace.run(Box::new(recording), &mut ())?;
    // The window ends when recording did (reading and symbolizing after).
    let window = Duration::from_nanos(halves.end_ns.saturating_sub(run.origin_ns));
    let post = Instant::now();
    let merged = crate::analysis::wall::merge(&crate::analysis::wall::Halves {
        cpu: &halves.cpu,
        off: &halves.off,
        waits: halves.waits.as_ref(),
        per_process: args.per_process,
        origin_ns: run.origin_ns,
        slice_ns: SLICE_NS,
    });
    let offcpu = wall_model::OffcpuFrom::of(
        &halves.collection,
        fallback.unwrap_or_else(|| "--tier proc".into()),
    );
    let mut wall = wall_model::Wall {
        target: run.target,
        started: run.started,
        started_unix_ns: run.started_unix_ns,
        window_ns: window.as_nanos() as u64,
        slice_ns: SLICE_NS,
        event: halves.cpu.event.clone(),
        freq_hz: args.freq,
        per_process: args.per_process,
        offcpu,
        roots: merged.roots,
        stacks: merged.stacks,
        modules: merged.modules,
        lost_samples: halves.cpu.lost,
        lost_stacks: halves.off.lost,
        lost_ends: halves.lost_ends,
        ended_early: run.ended_early,
        cost: ProbeCost {
            kdiag_cpu_secs: run.cost.kdiag_cpu_secs,
            wall_secs: window.as_secs_f64(),
            profiled_cpu_secs: None,
            post_secs: 0.0,
        },
        run_cpu_secs: 0.0,
        bpf_run_secs: run.bpf_run_secs,
    };
    if wall.roots.is_empty() {
        let why = anyhow::anyhow!(
            "no time of {} was recorded in {:.1} s: its threads neither ran nor blocked while \
             traced; profile longer (-d)",
            wall.target,
            window.as_secs_f64()
        );
        return Err(trace.explain(why));
    }
    for (path, data) in args.files.render_wall(&wall)? {
        user_files::write(path, &data)?;
    }
    if let Some(path) = &args.html {
        user_files::write(path, &render::wall_html::page(&wall)?)?;
    }
    wall.cost.post_secs = post.elapsed().as_secs_f64();
    wall.run_cpu_secs = crate::instruments::target::self_cpu_secs();
    let mut out = std::io::stdout().lock();
    if args.json {
        render::wall::json(&mut out, &wall)?;
    } else {
        render::wall::text(&mut out, &wall)?;
    }
    Ok(trace.exit_code(trace.own_exit()))
}
