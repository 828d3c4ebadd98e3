//! The kdiag binary: parse the command line, run the subcommand, map errors to
//! exit codes (see `kdiag::error`).

use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use kdiag::{cli, commands, error};

fn main() -> ExitCode {
    // Before any handler: which terminal signals we were started with
    // ignored (nohup), so the commands kdiag runs start the same way.
    kdiag::sys::process::supervisor::note_inherited_dispositions();
    // Die quietly when a reader such as `head` closes the pipe, like other
    // Unix tools, instead of reporting "Broken pipe". Kernel state is held
    // in fds, which the kernel releases when the process ends.
    // SAFETY: setting a signal disposition before any threads exist.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = cli::Cli::parse();
    if let Some(bytes) = cli.max_input {
        kdiag::user_files::set_input_limit(bytes);
    }
    match commands::run(cli.command, cli::Cli::command) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("kdiag: error: {err:#}");
            ExitCode::from(error::exit_code(&err))
        }
    }
}
