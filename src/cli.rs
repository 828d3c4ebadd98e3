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
    /// The largest file kdiag reads for you (answers, course, roster,
    /// submissions' files): default 1M; archives and evidence files have
    /// larger limits of their own, raised to SIZE if it is larger
    #[arg(long, global = true, value_name = "SIZE", value_parser = commands::args::size)]
    pub max_input: Option<u64>,
}
