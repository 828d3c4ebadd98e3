//! The command line: one variant per subcommand, each with its own `Args`
//! defined next to its implementation in `commands/`.

use clap::{Parser, Subcommand};

use crate::commands;

#[derive(Debug, Parser)]
#[command(
    name = "kdiag",
    version,
    about = "Guided labs and automated diagnosis for misbehaving Linux processes",
    long_about = "kdiag finds out why a Linux process misbehaves: who causes the load, \
                  what it does, why (stacks, I/O, exec failures) and how it trends. \
                  Tracing needs root, or CAP_PERFMON and CAP_BPF: run it with sudo.",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Probe what this machine allows and which tracing tier each feature uses
    Doctor(commands::doctor::Args),
    /// Snapshot of processes, like `ps aux`
    Ps(commands::ps::Args),
    /// Live view of processes, like `top`
    Top(commands::top::Args),
    /// Run a command and report its resource usage, like `time -v`
    Time(commands::time::Args),
    /// Sample CPU stacks and render a report, folded stacks or a flame graph
    Profile(commands::profile::Args),
    /// Where threads block and for how long: off-CPU stacks and flame graphs
    Offcpu(commands::offcpu::Args),
    /// Trace block I/O requests with their latency, like iosnoop
    Iosnoop(commands::iosnoop::Args),
    /// Trace a command's exec attempts and explain why they failed
    ExecTrace(commands::exec_trace::Args),
    /// Trace exec events system-wide, like execsnoop
    Execsnoop(commands::execsnoop::Args),
    /// Check an ELF file against the rules the Linux loader enforces
    ElfCheck(commands::elf_check::Args),
    /// List and run the bundled misbehaving workloads
    Workload(commands::workload::Args),
    /// Watch a process and say what dominates: CPU, a CPU queue, storage, a lock, memory growth
    Diagnose(commands::diagnose::Args),
    /// Run a guided lab: a misbehaving workload, step by step, with checks
    Lab(commands::lab::Args),
    /// Record a finding for a lab's checks
    Answer(commands::answer::Args),
    /// Check a lab's answers (for learners and autograders)
    Check(commands::check::Args),
    /// Grade a directory of lab submissions
    Grade(commands::grade::Args),
    /// Print a shell completion script
    Completions(commands::completions::Args),
    /// Print the man page
    Man(commands::man::Args),
}

/// `-p PID,...`, the same for every command that takes a list of processes.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PidList {
    /// Only these processes (comma-separated PIDs)
    #[arg(
        short = 'p',
        long = "pid",
        value_name = "PID,...",
        value_delimiter = ','
    )]
    pub pids: Vec<i32>,
}
