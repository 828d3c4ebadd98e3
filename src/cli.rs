//! The top-level parser. The subcommands, their arguments and their
//! dispatch live in `commands/`; this file only names the program.

use clap::Parser;

use crate::commands;

#[derive(Debug, Parser)]
#[command(
    name = "kdiag",
    version,
    about = "Guided labs and automated diagnosis for misbehaving Linux processes",
    long_about = "kdiag finds out why a Linux process misbehaves: who causes the load, \
                  what it does, why (stacks, I/O, exec failures) and how it trends. \
                  Tracing needs root, or CAP_PERFMON and CAP_BPF: run it with sudo.",
    propagate_version = true,
    after_help = crate::error::EXIT_CODES_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: commands::Command,
}
