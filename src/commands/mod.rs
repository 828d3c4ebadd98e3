//! One small file per subcommand: parse options, wire sources → analysis →
//! output. Each exposes `Args` (clap) and `run(Args) -> Result<exit code>`.

pub mod answer;
pub mod args;
pub mod check;
pub mod completions;
pub mod course;
pub mod diagnose;
pub mod doctor;
pub mod elf_check;
pub mod exec_trace;
pub mod execsnoop;
pub mod faults;
pub mod grade;
pub mod iosnoop;
pub mod lab;
pub mod man;
pub mod offcpu;
pub mod profile;
pub mod ps;
pub mod serve;
pub mod syscalls;
pub mod time;
pub mod top;
pub mod watch;
pub mod workload;

use clap::Subcommand;

use crate::course::policy::Ask;

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Probe what this machine allows and which tracing tier each feature uses
    Doctor(doctor::Args),
    /// Snapshot of processes, like `ps aux`
    Ps(ps::Args),
    /// Live view of processes, like `top`
    Top(top::Args),
    /// Run a command and report its resource usage, like `time -v`
    Time(time::Args),
    /// Sample CPU stacks and render a report, folded stacks or a flame graph
    Profile(profile::Args),
    /// Where threads block and for how long: off-CPU stacks and flame graphs
    Offcpu(offcpu::Args),
    /// Page faults of a process or command by code path: a profile and flame graphs
    Faults(faults::Args),
    /// System calls of a process or command by name: count, errors and time, like `strace -c`
    Syscalls(syscalls::Args),
    /// Trace block I/O requests with their latency, like iosnoop
    Iosnoop(iosnoop::Args),
    /// Trace a command's exec attempts and explain why they failed
    ExecTrace(exec_trace::Args),
    /// Trace exec events system-wide, like execsnoop
    Execsnoop(execsnoop::Args),
    /// Check an ELF file against the rules the Linux loader enforces
    ElfCheck(elf_check::Args),
    /// List and run the bundled misbehaving workloads
    Workload(workload::Args),
    /// Watch a process and say what dominates: CPU, a CPU queue, storage, a lock, memory growth
    Diagnose(diagnose::Args),
    /// Watch the machine with diagnose's model, always on, and export it to Prometheus
    Watch(watch::Args),
    /// Run a guided lab: a misbehaving workload, step by step, with checks
    Lab(lab::Args),
    /// Record a finding for a lab's checks
    Answer(answer::Args),
    /// Check a lab's answers (for learners and autograders)
    Check(check::Args),
    /// Grade a lab's submissions: each against the truth of the learner's own seed
    Grade(grade::Args),
    /// Create a course (its secret) and hand out each learner's seed
    Course(course::Args),
    /// Trace for users who may not, on a Unix socket: a root service for course servers
    Serve(serve::Args),
    /// Print a shell completion script
    Completions(completions::Args),
    /// Print the man page
    Man(man::Args),
}

/// Check a parsed command line as a whole before anything runs: what clap's
/// value parsers cannot see alone (which target, an existing device). Each
/// command's `run` calls its own check too; tests call this to exercise
/// every command line without tracing or running anything.
pub fn validate(command: &Command) -> anyhow::Result<()> {
    match command {
        Command::Profile(args) => profile::validate(args),
        Command::Offcpu(args) => offcpu::validate(args),
        Command::Faults(args) => faults::validate(args),
        Command::Syscalls(args) => syscalls::validate(args),
        Command::Iosnoop(args) => iosnoop::validate(args),
        Command::ExecTrace(args) => exec_trace::validate(args),
        Command::Diagnose(args) => diagnose::validate(args),
        _ => Ok(()),
    }
}

/// What a command line asks that a learner on a course server may be
/// refused (`course::policy` decides, for everything here).
fn learner_asks(command: &Command) -> Vec<Ask> {
    let pids = |p: &[i32]| p.iter().map(|&p| Ask::Pid(p as u32)).collect::<Vec<_>>();
    let labs = |f: &args::Files| f.labs.iter().map(|_| Ask::Labs).collect::<Vec<_>>();
    // profile -a, offcpu -a, execsnoop and iosnoop are narrowed to the caller's
    // processes at their source (`args::scope`), not refused.
    let mut asks = match command {
        Command::Profile(a) => pids(&a.pid.into_iter().collect::<Vec<_>>()),
        Command::Offcpu(a) => pids(&a.pids.pids),
        Command::Faults(a) => pids(&a.pids.pids),
        Command::Syscalls(a) => pids(&a.pids.pids),
        Command::Top(a) => pids(&a.only.pids),
        Command::Ps(a) => pids(&a.only.pids)
            .into_iter()
            .chain(a.user.map(Ask::User))
            .collect(),
        Command::Iosnoop(a) => a.pid.map(Ask::Pid).into_iter().collect(),
        Command::ExecTrace(a) => a.pid.map(Ask::Pid).into_iter().collect(),
        Command::Execsnoop(a) => a.uid.map(Ask::User).into_iter().collect(),
        Command::Diagnose(a) if a.cgroup.is_some() || a.unit.is_some() => vec![Ask::Cgroup],
        Command::Diagnose(a) => pids(&a.pid.into_iter().collect::<Vec<_>>()),
        Command::Watch(_) => vec![Ask::Watch],
        Command::Lab(a) => labs(&a.files),
        Command::Answer(a) => labs(&a.files),
        Command::Check(a) => labs(&a.files),
        _ => vec![],
    };
    if let Command::Lab(lab::Args { seed: Some(_), .. })
    | Command::Check(check::Args { seed: Some(_), .. })
    | Command::Check(check::Args {
        course: Some(_), ..
    }) = command
    {
        asks.insert(0, Ask::Seed);
    }
    asks
}

/// Run one subcommand and return the process exit code. `app` builds the
/// whole command line's definition, for the man page and completions.
pub fn run(command: Command, app: fn() -> clap::Command) -> anyhow::Result<u8> {
    if let Some(code) = serve::forward(&command)? {
        return Ok(code);
    }
    crate::course::policy::allow_all(&learner_asks(&command))?;
    match command {
        Command::Doctor(args) => doctor::run(args),
        Command::Ps(args) => ps::run(args),
        Command::Top(args) => top::run(args),
        Command::Time(args) => time::run(args),
        Command::Profile(args) => profile::run(args),
        Command::Offcpu(args) => offcpu::run(args),
        Command::Faults(args) => faults::run(args),
        Command::Syscalls(args) => syscalls::run(args),
        Command::Iosnoop(args) => iosnoop::run(args),
        Command::ExecTrace(args) => exec_trace::run(args),
        Command::Execsnoop(args) => execsnoop::run(args),
        Command::ElfCheck(args) => elf_check::run(args),
        Command::Workload(args) => workload::run(args),
        Command::Diagnose(args) => diagnose::run(args),
        Command::Watch(args) => watch::run(args),
        Command::Lab(args) => lab::run(args),
        Command::Answer(args) => answer::run(args),
        Command::Check(args) => check::run(args),
        Command::Grade(args) => grade::run(args),
        Command::Course(args) => course::run(args),
        Command::Serve(args) => serve::run(args, app),
        Command::Completions(args) => completions::run(args, app()),
        Command::Man(args) => man::run(args, app()),
    }
}
