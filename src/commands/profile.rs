//! `kdiag profile`: sample CPU stacks of a process, a command or every CPU,
//! then print the top functions and hottest stacks, and write folded stacks,
//! a flame graph, pprof or speedscope files.
//!
//! Stages: record (sys::perf, drained into the recorder) → unwind
//! (instruments::profile::unwind, per sample as drained, for
//! `--call-graph dwarf|auto`) → symbolize (at the end) → fold and render.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;

use crate::analysis::fold;
use crate::error::usage;
use crate::instruments::profile::symbolize::{RecordOptions, Recorder};
use crate::instruments::profile::unwind::{self, CallGraph};
use crate::model::profile::Profile;
use crate::model::stacks::StackSet;
use crate::render;
use crate::sys::perf::{EventSpec, NoHardwareCounter, Session, Target};
use crate::sys::process::interrupt::Interrupt;
use crate::sys::process::spawn::HeldChild;
use crate::sys::process::user_files;

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
    /// Write folded stacks (`comm;outer;...;inner count`) for inferno or FlameGraph
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    /// Write an SVG flame graph
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Write a gzip'd pprof profile (go tool pprof, Parca, Pyroscope, Grafana)
    #[arg(long, value_name = "FILE")]
    pub pprof: Option<PathBuf>,
    /// Write a speedscope JSON profile (speedscope.app; the Firefox Profiler imports it too)
    #[arg(long, value_name = "FILE")]
    pub speedscope: Option<PathBuf>,
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
/// Data pages per CPU ring: ~1 MiB, room for ~4000 deep-stack samples.
const RING_PAGES: usize = 256;
/// Samples a ring holds when each carries a stack copy: at 999 Hz, a
/// quarter of a second before the ring is full.
const RING_STACK_SAMPLES: usize = 256;

/// The checks on the arguments as a whole (values are checked when parsed).
pub fn validate(args: &Args) -> anyhow::Result<()> {
    let targets = args.pid.is_some() as u8 + args.all_cpus as u8 + !args.command.is_empty() as u8;
    if targets != 1 {
        return Err(usage(
            "say what to profile: one of -p PID, -a (all CPUs) or -- CMD ARGS",
        ));
    }
    unwind::check_stack_size(args.stack_size).map_err(usage)?;
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    validate(&args)?;
    let stack_size = unwind::check_stack_size(args.stack_size).map_err(usage)?;
    let interrupt = Interrupt::catch()?;

    let copies_stack = args.call_graph.copies_stack() && !args.kernel_only;
    let mut profile = Profile {
        freq_hz: args.freq,
        call_graph: format!("{:?}", args.call_graph).to_lowercase(),
        stack_size: copies_stack.then_some(stack_size),
        ..Default::default()
    };
    let opts = RecordOptions {
        include_idle: args.include_idle,
        user_only: args.user_only,
        kernel_only: args.kernel_only,
        call_graph: args.call_graph,
    };
    let mut recorder = Recorder::new(opts);
    let (mut session, mut target) = if args.command.is_empty() {
        let t = match args.pid {
            Some(pid) => {
                if pid <= 0 || !Path::new(&format!("/proc/{pid}")).exists() {
                    return Err(crate::error::NoSuchProcess::one(pid));
                }
                recorder.capture(pid as u32);
                profile.target = format!("PID {pid} ({})", comm_of(pid));
                Target::Process(pid)
            }
            None => {
                profile.target = "all CPUs".into();
                Target::AllCpus
            }
        };
        let session = open(&args, t, false, &mut profile)?;
        session.enable()?;
        (session, Running::Other(t))
    } else {
        let program = args.command[0].to_string_lossy().into_owned();
        let mut child =
            HeldChild::spawn(&args.command).with_context(|| format!("cannot start `{program}`"))?;
        recorder.name(child.pid, &comm_name(&args.command[0]));
        profile.target = command_line(&args.command);
        // Dropping an unreleased child makes it exit without running anything.
        let session = open(&args, Target::Process(child.pid as i32), true, &mut profile)?;
        // The events switch on by themselves when the child execs the command.
        child.release().context("releasing the command")?;
        if let Some(source) = child.exec_error().context("starting the command")? {
            return Err(crate::error::CannotRun {
                program,
                error: source,
            }
            .into());
        }
        let child = Running::Child {
            child,
            usage: None,
            own_status: None,
        };
        (session, child)
    };

    (profile.started, profile.started_unix_ns) = utc_now();
    let t0 = Instant::now();
    let cpu0 = self_cpu_secs();
    let busy0 = target.busy_secs();
    let mut busy_last = busy0;
    let limit = args.duration.map(Duration::from_secs_f64);
    loop {
        session.poll(Duration::from_millis(100))?;
        session.drain(|r| recorder.record(&r));
        if interrupt.is_set() || limit.is_some_and(|l| t0.elapsed() >= l) {
            break;
        }
        if let Some(b) = target.busy_secs() {
            busy_last = Some(b);
        }
        if let Some(why) = target.ended()? {
            profile.ended_early = why;
            break;
        }
    }
    session.disable()?;
    session.drain(|r| recorder.record(&r));
    let wall = t0.elapsed().as_secs_f64();
    let kdiag_cpu = self_cpu_secs() - cpu0;
    target.finish()?;
    let losses = session.losses();
    drop(session);
    let post = Instant::now();

    profile.lost = losses.lost;
    profile.throttled = losses.throttled;
    profile.cost.wall_secs = wall;
    profile.cost.kdiag_cpu_secs = kdiag_cpu;
    profile.cost.profiled_cpu_secs = match &target {
        Running::Child { usage, .. } => *usage,
        Running::Other(_) => busy0.zip(busy_last).map(|(a, b)| b - a),
    };
    recorder.finish(&mut profile);
    let summary = fold::summarize(&profile, TOP);
    let folded = fold::fold(&profile);
    let ctrl_c_ends = args.command.is_empty() && args.duration.is_none();
    if folded.is_empty() {
        let why = anyhow::anyhow!("{}", render::flamegraph::no_samples_reason(&profile));
        return Err(interrupt.explain(why, ctrl_c_ends));
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
    if args.pprof.is_some() || args.speedscope.is_some() {
        let set = StackSet::cpu(&profile);
        if let Some(path) = &args.pprof {
            write_file(path, &render::pprof::gzipped(&set)?)?;
        }
        if let Some(path) = &args.speedscope {
            write_file(path, &render::speedscope::json(&set)?)?;
        }
    }
    profile.cost.post_secs = post.elapsed().as_secs_f64();

    let mut out = std::io::stdout().lock();
    if args.json {
        render::profile::json(&mut out, &profile, &summary)?;
    } else {
        render::profile::text(&mut out, &profile, &summary)?;
    }
    // A command that ended by itself passes its status on; one kdiag
    // stopped at the end of -d does not. Ctrl-C is how -p and -a end
    // without -d.
    let code = match &target {
        Running::Child {
            own_status: Some(status),
            ..
        } => crate::error::status_exit(*status),
        _ => crate::error::OK,
    };
    Ok(interrupt.exit_code(code, ctrl_c_ends))
}

/// Open the sampling events: hardware cycles where the machine has a PMU,
/// else the cpu-clock software event.
fn open(args: &Args, target: Target, on_exec: bool, p: &mut Profile) -> anyhow::Result<Session> {
    let mut pages = RING_PAGES;
    let stack_size = p.stack_size;
    let shape = |spec: EventSpec| {
        let mut spec = spec.with_callchain().with_task_events();
        if let Some(bytes) = stack_size {
            spec = spec.with_user_stack(bytes);
            if args.call_graph == CallGraph::Dwarf {
                spec = spec.without_user_callchain();
            }
        }
        if on_exec {
            spec = spec.with_enable_on_exec();
        }
        if args.user_only {
            spec = spec.user_only();
        }
        if args.kernel_only {
            spec = spec.kernel_only();
        }
        spec
    };
    if let Some(bytes) = p.stack_size {
        let record = bytes as usize + 1024;
        pages = (RING_STACK_SAMPLES * record / crate::sys::perf::page_size()).max(RING_PAGES);
    }
    let cycles = shape(EventSpec::cycles(args.freq));
    match Session::open(std::slice::from_ref(&cycles), target, pages) {
        Ok(s) => {
            p.event = cycles.name().into();
            Ok(s)
        }
        // No PMU (a VM): cpu-clock, as bcc's profile does. Any other
        // refusal is retried with cpu-clock too, so the error names the
        // event every machine has.
        Err(e) => {
            let clock = shape(EventSpec::cpu_clock(args.freq));
            p.event = clock.name().into();
            p.event_note = Some(if e.downcast_ref::<NoHardwareCounter>().is_some() {
                "no hardware PMU here, so no cycles event".into()
            } else {
                format!("cycles unavailable: {e:#}")
            });
            Session::open(&[clock], target, pages)
        }
    }
}

/// What is being profiled, while it runs.
enum Running {
    /// `-- CMD`: our child, reaped at the end.
    Child {
        child: HeldChild,
        usage: Option<f64>,
        /// The wait status, when the command ended by itself.
        own_status: Option<i32>,
    },
    /// `-p PID` or `-a`.
    Other(Target),
}

impl Running {
    /// CPU seconds used so far by the target, where it can be read.
    fn busy_secs(&self) -> Option<f64> {
        match self {
            Running::Child { .. } => None,
            Running::Other(Target::Process(pid)) => {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                let rest = &stat[stat.rfind(')')? + 2..];
                let f: Vec<&str> = rest.split(' ').collect();
                // utime and stime are fields 14 and 15, the 12th and 13th after ')'.
                let ticks: f64 =
                    f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
                Some(ticks / clock_ticks())
            }
            Running::Other(Target::AllCpus) => {
                let stat = std::fs::read_to_string("/proc/stat").ok()?;
                let cpu: Vec<f64> = stat
                    .lines()
                    .next()?
                    .split_whitespace()
                    .skip(1)
                    .filter_map(|v| v.parse().ok())
                    .collect();
                // Everything but idle (3) and iowait (4).
                let busy: f64 = cpu
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != 3 && *i != 4)
                    .map(|(_, v)| v)
                    .sum();
                Some(busy / clock_ticks())
            }
        }
    }

    /// Whether the target has gone, with why when that ends the run early.
    fn ended(&mut self) -> anyhow::Result<Option<Option<String>>> {
        match self {
            Running::Child {
                child,
                usage,
                own_status,
            } => {
                let reaped = child
                    .try_reap()
                    .context("waiting for the profiled command")?;
                if let Some((status, ru)) = reaped {
                    *usage = Some(cpu_secs(&ru));
                    *own_status = Some(status);
                    return Ok(Some(None));
                }
                Ok(None)
            }
            Running::Other(Target::Process(pid)) => {
                let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|s| s.rfind(')').and_then(|i| s[i + 2..].chars().next()));
                match state {
                    None | Some('Z') | Some('X') => {
                        Ok(Some(Some(format!("PID {pid} exited during the run"))))
                    }
                    _ => Ok(None),
                }
            }
            Running::Other(Target::AllCpus) => Ok(None),
        }
    }

    /// End a command still running (after -d or Ctrl-C), with everything
    /// it started, and reap it.
    fn finish(&mut self) -> anyhow::Result<()> {
        if let Running::Child { child, usage, .. } = self
            && usage.is_none()
        {
            child.stop(STOP_GRACE);
            let (_, ru) = child.reap().context("waiting for the profiled command")?;
            *usage = Some(cpu_secs(&ru));
        }
        Ok(())
    }
}

/// User plus system CPU seconds of a reaped child.
fn cpu_secs(ru: &libc::rusage) -> f64 {
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn tv(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}

pub(crate) fn self_cpu_secs() -> f64 {
    // SAFETY: rusage is plain data filled in by the kernel.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a local.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).max(1) as f64
}

/// The kernel's name for a process running `program` (basename, 15 bytes).
pub(crate) fn comm_name(program: &OsString) -> String {
    let base = Path::new(program)
        .file_name()
        .map(|b| b.to_string_lossy().into_owned())
        .unwrap_or_default();
    base.chars().take(15).collect()
}

pub(crate) fn comm_of(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim_end().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// `cpu-burn --duration 5` for `/path/to/cpu-burn --duration 5`.
pub(crate) fn command_line(argv: &[OsString]) -> String {
    let mut line: Vec<String> = argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    line[0] = comm_name(&argv[0]);
    let line = line.join(" ");
    if line.chars().count() > 60 {
        line.chars().take(57).collect::<String>() + "..."
    } else {
        line
    }
}

/// Write a result file as the user who named it.
pub(crate) fn write_file(path: &Path, data: &[u8]) -> anyhow::Result<()> {
    Ok(user_files::write(path, data)?)
}

/// Now, as `2026-11-22T07:02:28Z` and in ns since the epoch.
pub(crate) fn utc_now() -> (String, u64) {
    let since = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    (
        crate::analysis::calendar::utc_iso8601(since.as_secs() as i64),
        since.as_nanos() as u64,
    )
}
