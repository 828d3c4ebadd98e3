//! kdiag: guided labs and automated diagnosis for misbehaving Linux processes.
//!
//! Data flows one way: `sys` (collect) → `model` (plain data) → `analysis`
//! (pure functions) → `render` / `tui`. `commands` wires them per subcommand.

mod analysis;
mod cli;
mod commands;
mod error;
mod model;
mod render;
mod sys;
mod tui;

use std::process::ExitCode;

use clap::Parser;

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
