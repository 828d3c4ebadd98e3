//! One trace, start to end, for every command that traces a target: the
//! target (a `-- CMD` started held, `-p` PIDs or every process), Ctrl-C and
//! SIGTERM, the loop (poll until -d, an interruption or the target's end),
//! what the run cost, the end of a command still running and the exit code.
//! A command opens its source through [`Trace::open`], hands it to
//! [`Trace::run`] and renders.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use super::target::{self, Interrupt, Running, Scope};
use super::{Ask, ReportSource, Tier};
use crate::model::profile::{ProbeCost, Profile};
use crate::model::syscalls::Syscalls;
use crate::sys::bpf::{self, RunTimeStats};
use crate::sys::process::spawn::HeldChild;

/// What a trace follows, as the command line names it.
pub enum Aim<'a> {
    /// `-- CMD`: started held, so tracing covers it from its exec.
    Command(&'a [OsString]),
    /// `-p PID,...`: until every one has gone.
    Pids(&'a [i32]),
    /// `-a`: the processes in scope (and the children they start), named
    /// `everyone` ("all CPUs") when that is every process.
    All(Scope, &'static str),
}

impl<'a> Aim<'a> {
    /// `-- CMD` when there is one, else the PIDs.
    pub fn of(pids: &'a [i32], command: &'a [OsString]) -> Aim<'a> {
        match command.is_empty() {
            true => Aim::Pids(pids),
            false => Aim::Command(command),
        }
    }
}

/// The facts of a finished run, stamped on its report.
#[derive(Debug, Default)]
pub struct Run {
    /// "PID 42 (burn)", the command line, "all CPUs".
    pub target: String,
    /// UTC, ISO 8601, and in ns since the epoch.
    pub started: String,
    pub started_unix_ns: u64,
    /// The window's start, in the clock of perf samples and BPF
    /// (CLOCK_MONOTONIC ns).
    pub origin_ns: u64,
    /// Wall and kdiag's CPU over the window; the target's CPU where
    /// measured ([`Trace::measure_busy`]); `post_secs`: the source's finish.
    pub cost: ProbeCost,
    /// Why the target went before -d was up.
    pub ended_early: Option<String>,
    /// The BPF programs' run time, where [`Trace::measure_bpf`] asked.
    pub bpf_run_secs: Option<f64>,
}

/// A report a trace fills with its [`Run`].
pub trait Stamped {
    fn stamp(&mut self, run: &Run);
}

impl Stamped for Profile {
    fn stamp(&mut self, run: &Run) {
        self.target.clone_from(&run.target);
        self.started.clone_from(&run.started);
        self.started_unix_ns = run.started_unix_ns;
        self.cost = run.cost.clone();
        self.ended_early.clone_from(&run.ended_early);
    }
}

impl Stamped for Syscalls {
    fn stamp(&mut self, run: &Run) {
        self.target.clone_from(&run.target);
        self.started.clone_from(&run.started);
        self.cost = run.cost.clone();
        self.ended_early.clone_from(&run.ended_early);
    }
}

/// A report kept apart from the source (`profile --wall`'s halves).
impl Stamped for () {
    fn stamp(&mut self, _: &Run) {}
}

/// How long a command still running at the end gets between SIGTERM and
/// SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// One trace of a target, from its start to its exit code.
pub struct Trace {
    interrupt: Interrupt,
    limit: Option<Duration>,
    /// Ctrl-C is this trace's documented end (no -d, no command).
    ctrl_c_ends: bool,
    /// The held command and its argv, until [`Trace::run`] releases it.
    held: Option<(HeldChild, Vec<OsString>)>,
    running: Option<Running>,
    pids: Vec<i32>,
    target: String,
    /// "Tracing {what} of {target}..." on stderr once the target runs.
    pub announce: Option<&'static str>,
    /// Read the target's CPU over the window (profile's probe effect).
    pub measure_busy: bool,
    /// Turn the kernel's BPF run-time statistics on while traced.
    pub measure_bpf: bool,
    stats: Option<(RunTimeStats, Option<std::os::fd::OwnedFd>)>,
}

impl Trace {
    /// Check the PIDs, catch the interrupting signals and start a command
    /// held; stop after `duration` seconds if given.
    pub fn start(aim: Aim, duration: Option<f64>) -> anyhow::Result<Trace> {
        let interrupt = Interrupt::catch()?;
        let (held, running, pids, target) = match aim {
            Aim::Command(command) => {
                let child = target::spawn(command)?;
                let pids = vec![child.pid as i32];
                let name = target::command_line(command);
                (Some((child, command.to_vec())), None, pids, name)
            }
            Aim::Pids(pids) => {
                target::check_pids(pids)?;
                let name = super::profile::target_name(pids);
                (
                    None,
                    Some(Running::Pids(pids.to_vec())),
                    pids.to_vec(),
                    name,
                )
            }
            Aim::All(scope, everyone) => {
                let pids = scope.processes()?.unwrap_or_default();
                (None, Some(Running::All), pids, scope.describe(everyone))
            }
        };
        Ok(Trace {
            interrupt,
            limit: duration.map(Duration::from_secs_f64),
            ctrl_c_ends: held.is_none() && duration.is_none(),
            held,
            running,
            pids,
            target,
            announce: None,
            measure_busy: false,
            measure_bpf: false,
            stats: None,
        })
    }

    /// Open the source with `open`, given the processes to open it on
    /// (`-p`'s, the held command's, or `-a`'s in scope; empty: every
    /// process); `--tier bpf` that fails is a missing
    /// feature (exit 3), as `auto` falling back is not. (iosnoop, exec-trace
    /// and execsnoop keep their exit 1: they trace without this object.)
    pub fn open<T>(
        &mut self,
        ask: Ask,
        open: impl FnOnce(&[i32]) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        if self.measure_bpf {
            // On before the programs load, held until the run is over.
            self.stats = Some(bpf::measure_run_time());
        }
        open(&self.pids).map_err(|e| match ask {
            Ask::Only(Tier::Bpf) => {
                crate::error::missing(format!("the BPF tier cannot run here: {e:#}"))
            }
            _ => e,
        })
    }

    /// Release the target, poll `source` until -d, an interruption or the
    /// target's end, then finish it into `report` and end the target.
    pub fn run<R: Stamped, F>(
        &mut self,
        mut source: Box<dyn ReportSource<R, F>>,
        report: &mut R,
    ) -> anyhow::Result<(Run, F)> {
        if let Some((child, command)) = self.held.take() {
            source.watch(child.pid, &target::comm_name(&command[0]))?;
            self.running = Some(target::release(child, &command)?);
        }
        let running = self.running.as_mut().expect("a trace has a target");
        if let Some(what) = self.announce {
            eprintln!("Tracing {what} of {}...", self.target);
        }
        let mut run = Run {
            target: self.target.clone(),
            ..Run::default()
        };
        (run.started, run.started_unix_ns) = target::utc_now();
        run.origin_ns = target::now_ns();
        let cpu0 = target::self_cpu_secs();
        let busy0 = self.measure_busy.then(|| running.busy_secs()).flatten();
        let mut busy_last = busy0;
        loop {
            source.poll(Duration::from_millis(100))?;
            let elapsed = Duration::from_nanos(target::now_ns() - run.origin_ns);
            if self.interrupt.is_set() || self.limit.is_some_and(|l| elapsed >= l) {
                break;
            }
            if self.measure_busy
                && let Some(b) = running.busy_secs()
            {
                busy_last = Some(b);
            }
            if running.over(&mut run.ended_early)? {
                break;
            }
        }
        source.stop()?;
        run.cost.wall_secs = (target::now_ns() - run.origin_ns) as f64 / 1e9;
        run.cost.kdiag_cpu_secs = target::self_cpu_secs() - cpu0;
        // The wait for a command to stop is not the report's cost.
        let reads_target = source.reads_target();
        if !reads_target {
            running.finish(STOP_GRACE)?;
        }
        let post = Instant::now();
        let found = source.finish(report)?;
        run.cost.post_secs = post.elapsed().as_secs_f64();
        if reads_target {
            running.finish(STOP_GRACE)?;
        }
        if self.measure_busy {
            run.cost.profiled_cpu_secs = match running {
                Running::Child { usage, .. } => *usage,
                _ => busy0.zip(busy_last).map(|(a, b)| b - a),
            };
        }
        // Every program is unloaded by now (`finish`), so tallied.
        run.bpf_run_secs = self
            .stats
            .as_ref()
            .filter(|(s, _)| *s != RunTimeStats::Unavailable)
            .map(|_| bpf::tally().run_time_ns as f64 / 1e9);
        report.stamp(&run);
        Ok((run, found))
    }

    /// `err`, marked as the interruption's consequence when a signal
    /// interrupted the run (exit 128+N), unless it was Ctrl-C ending a
    /// trace whose end is Ctrl-C.
    pub fn explain(&self, err: anyhow::Error) -> anyhow::Error {
        self.interrupt.explain(err, self.ctrl_c_ends)
    }

    /// The exit code of a run that would exit with `code`: 128+N when
    /// signal N interrupted it (Ctrl-C ending a trace without -d or a
    /// command aside).
    pub fn exit_code(&self, code: u8) -> u8 {
        self.interrupt.exit_code(code, self.ctrl_c_ends)
    }

    /// A command that ended by itself passes its status on; one stopped at
    /// the end of -d does not.
    pub fn own_exit(&self) -> u8 {
        match &self.running {
            Some(Running::Child {
                own_status: Some(status),
                ..
            }) => crate::error::status_exit(*status),
            _ => crate::error::OK,
        }
    }
}
