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
use crate::error::{missing, usage};
use crate::instruments::profile::unwind::{self, CallGraph};
use crate::instruments::profile::{self, Request};
use crate::instruments::target::{self, Running};
use crate::instruments::{Ask, Tier, wall};
use crate::model::profile::{ProbeCost, Profile};
use crate::model::wall as wall_model;
use crate::render;
use crate::render::files::ProfileFiles;
use crate::sys::process::interrupt::Interrupt;
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

/// How long a command still running at the end gets between SIGTERM and
/// SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);
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
    if args.wall {
        return run_wall(args);
    }
    let stack_size = unwind::check_stack_size(args.stack_size).map_err(usage)?;
    let interrupt = Interrupt::catch()?;

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
        on_exec: !args.command.is_empty(),
        per_thread: false,
    };
    let (mut sampler, mut running) = if args.command.is_empty() {
        let pid = args.pid;
        // -a on a course server: the learner's processes (and the children
        // they start), one event per task, never another user's.
        let scope = super::args::scope()?;
        let pids = match pid {
            Some(pid) => {
                target::check_pids(&[pid])?;
                profile.target = format!("PID {pid} ({})", target::comm_of(pid));
                vec![pid]
            }
            None => {
                profile.target = scope.describe("all CPUs");
                scope.processes()?.unwrap_or_default()
            }
        };
        let sampler = profile::open_on(request, &pids)?;
        let running = match pid {
            Some(pid) => Running::Pids(vec![pid]),
            None => Running::All,
        };
        (sampler, running)
    } else {
        let child = target::spawn(&args.command)?;
        profile.target = target::command_line(&args.command);
        // Dropping an unreleased child makes it exit without running anything.
        let mut sampler = profile::open(request, Some(child.pid as i32))?;
        sampler.name(child.pid, &target::comm_name(&args.command[0]));
        // The events switch on by themselves when the child execs the command.
        (sampler, target::release(child, &args.command)?)
    };

    (profile.started, profile.started_unix_ns) = target::utc_now();
    let t0 = Instant::now();
    let cpu0 = target::self_cpu_secs();
    let busy0 = running.busy_secs();
    let mut busy_last = busy0;
    let limit = args.duration.map(Duration::from_secs_f64);
    loop {
        sampler.poll(Duration::from_millis(100))?;
        if interrupt.is_set() || limit.is_some_and(|l| t0.elapsed() >= l) {
            break;
        }
        if let Some(b) = running.busy_secs() {
            busy_last = Some(b);
        }
        if running.over(&mut profile.ended_early)? {
            break;
        }
    }
    sampler.stop()?;
    let wall = t0.elapsed().as_secs_f64();
    let kdiag_cpu = target::self_cpu_secs() - cpu0;
    running.finish(STOP_GRACE)?;
    profile.cost.wall_secs = wall;
    profile.cost.kdiag_cpu_secs = kdiag_cpu;
    profile.cost.profiled_cpu_secs = match &running {
        Running::Child { usage, .. } => *usage,
        _ => busy0.zip(busy_last).map(|(a, b)| b - a),
    };
    let post = Instant::now();
    sampler.finish(&mut profile);
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
    profile.cost.post_secs = post.elapsed().as_secs_f64();

    let mut out = std::io::stdout().lock();
    if args.json {
        render::profile::json(&mut out, &profile, &summary)?;
    } else {
        render::profile::text(&mut out, &profile, &summary)?;
    }
    Ok(interrupt.exit_code(own_exit(&running), ctrl_c_ends))
}

/// A command that ended by itself passes its status on; one kdiag stopped
/// at the end of -d does not. (Ctrl-C is how -p and -a end without -d.)
fn own_exit(running: &Running) -> u8 {
    match running {
        Running::Child {
            own_status: Some(status),
            ..
        } => crate::error::status_exit(*status),
        _ => crate::error::OK,
    }
}

/// `--wall`: both halves opened together on the target, merged into one
/// profile in nanoseconds, reported per thread (or process).
fn run_wall(args: Args) -> anyhow::Result<u8> {
    let interrupt = Interrupt::catch()?;
    // The BPF programs' run time is part of the cost: measured while held.
    let (stats, _stats_on) = crate::sys::bpf::measure_run_time();
    let (mut recording, mut running, target) = match args.pid {
        Some(pid) => {
            target::check_pids(&[pid])?;
            let recording = open_wall(&args, &[pid], false)?;
            let name = format!("PID {pid} ({})", target::comm_of(pid));
            (recording, Running::Pids(vec![pid]), name)
        }
        None => {
            let child = target::spawn(&args.command)?;
            let mut recording = open_wall(&args, &[child.pid as i32], true)?;
            recording.watch(child.pid, &target::comm_name(&args.command[0]))?;
            let name = target::command_line(&args.command);
            (recording, target::release(child, &args.command)?, name)
        }
    };
    if let Some(f) = &recording.fallback {
        eprintln!(
            "No BPF ({:#}); off-CPU time comes from /proc, without stacks.",
            f.error
        );
    }
    let fallback = recording.fallback.take().map(|f| format!("{:#}", f.error));
    let (started, started_unix_ns) = target::utc_now();
    let t0 = Instant::now();
    // The window's start, in the clock of samples and BPF.
    let origin_ns = crate::sys::monotonic_ns();
    let cpu0 = target::self_cpu_secs();
    let limit = args.duration.map(Duration::from_secs_f64);
    let mut ended_early = None;
    loop {
        recording.poll(Duration::from_millis(100))?;
        if interrupt.is_set() || limit.is_some_and(|l| t0.elapsed() >= l) {
            break;
        }
        if running.over(&mut ended_early)? {
            break;
        }
    }
    let kdiag_cpu = target::self_cpu_secs() - cpu0;
    let halves = recording.finish()?;
    // The window ends when recording did (reading and symbolizing after).
    let window = Duration::from_nanos(halves.end_ns.saturating_sub(origin_ns));
    running.finish(STOP_GRACE)?;
    let post = Instant::now();
    let merged = crate::analysis::wall::merge(&crate::analysis::wall::Halves {
        cpu: &halves.cpu,
        off: &halves.off,
        waits: halves.waits.as_ref(),
        per_process: args.per_process,
        origin_ns,
        slice_ns: SLICE_NS,
    });
    let offcpu = wall_model::OffcpuFrom::of(
        &halves.collection,
        fallback.unwrap_or_else(|| "--tier proc".into()),
    );
    let mut wall = wall_model::Wall {
        target,
        started,
        started_unix_ns,
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
        ended_early,
        cost: ProbeCost {
            kdiag_cpu_secs: kdiag_cpu,
            wall_secs: window.as_secs_f64(),
            profiled_cpu_secs: None,
            post_secs: 0.0,
        },
        run_cpu_secs: 0.0,
        // Every program is unloaded by now (`finish`), so tallied.
        bpf_run_secs: (stats != crate::sys::bpf::RunTimeStats::Unavailable)
            .then(|| crate::sys::bpf::tally().run_time_ns as f64 / 1e9),
    };
    let ctrl_c_ends = args.command.is_empty() && args.duration.is_none();
    if wall.roots.is_empty() {
        let why = anyhow::anyhow!(
            "no time of {} was recorded in {:.1} s: its threads neither ran nor blocked while \
             traced; profile longer (-d)",
            wall.target,
            window.as_secs_f64()
        );
        return Err(interrupt.explain(why, ctrl_c_ends));
    }
    for (path, data) in args.files.render_wall(&wall)? {
        user_files::write(path, &data)?;
    }
    if let Some(path) = &args.html {
        user_files::write(path, &render::wall_html::page(&wall)?)?;
    }
    wall.cost.post_secs = post.elapsed().as_secs_f64();
    wall.run_cpu_secs = target::self_cpu_secs();
    let mut out = std::io::stdout().lock();
    if args.json {
        render::wall::json(&mut out, &wall)?;
    } else {
        render::wall::text(&mut out, &wall)?;
    }
    Ok(interrupt.exit_code(own_exit(&running), ctrl_c_ends))
}

/// Open --wall's recording on `pids` (a held command's: `on_exec`).
fn open_wall(args: &Args, pids: &[i32], on_exec: bool) -> anyhow::Result<wall::Recording> {
    wall::open(args.tier, pids, args.freq, on_exec, !args.no_wakers).map_err(|e| match args.tier {
        Ask::Only(Tier::Bpf) => missing(format!("the BPF tier cannot run here: {e:#}")),
        _ => e,
    })
}
