//! Argument types several subcommands share.

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
