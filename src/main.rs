//! The kdiag binary: parse the command line, run the subcommand, map errors to
//! exit codes (see `kdiag::error`).

use std::process::ExitCode;

use clap::Parser;
use kdiag::{cli, commands, error};

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::run(cli.command) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("kdiag: error: {err:#}");
            ExitCode::from(error::exit_code(&err))
        }
    }
}
