//! One small file per subcommand: parse options, wire sources → analysis →
//! output. Each exposes `Args` (clap) and `run(Args) -> Result<exit code>`.

pub mod answer;
pub mod check;
pub mod completions;
pub mod diagnose;
pub mod doctor;
pub mod elf_check;
pub mod exec_trace;
pub mod execsnoop;
pub mod grade;
pub mod iosnoop;
pub mod lab;
pub mod man;
pub mod offcpu;
pub mod profile;
pub mod ps;
pub mod time;
pub mod top;
pub mod workload;

use crate::cli::Command;

/// Run one subcommand and return the process exit code.
pub fn run(command: Command) -> anyhow::Result<u8> {
    match command {
        Command::Doctor(args) => doctor::run(args),
        Command::Ps(args) => ps::run(args),
        Command::Top(args) => top::run(args),
        Command::Time(args) => time::run(args),
        Command::Profile(args) => profile::run(args),
        Command::Offcpu(args) => offcpu::run(args),
        Command::Iosnoop(args) => iosnoop::run(args),
        Command::ExecTrace(args) => exec_trace::run(args),
        Command::Execsnoop(args) => execsnoop::run(args),
        Command::ElfCheck(args) => elf_check::run(args),
        Command::Workload(args) => workload::run(args),
        Command::Diagnose(args) => diagnose::run(args),
        Command::Lab(args) => lab::run(args),
        Command::Answer(args) => answer::run(args),
        Command::Check(args) => check::run(args),
        Command::Grade(args) => grade::run(args),
        Command::Completions(args) => completions::run(args),
        Command::Man(args) => man::run(args),
    }
}
