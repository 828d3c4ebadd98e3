//! `kdiag time [-v] [--json] -- CMD ARGS`: run a command and report its
//! resource usage like GNU `time -v`, plus the bytes it really moved to and
//! from storage and how it ended.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use crate::instruments::rusage::{self, RunError};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "The report goes to stderr (or --output FILE), like GNU time, so the \
                        command's own output stays clean. kdiag exits with the command's exit \
                        code, 128+N if signal N killed it, 127 if it was not found and 126 if \
                        it could not be executed."
)]
pub struct Args {
    /// Print every counter, like `time -v`
    #[arg(short, long)]
    pub verbose: bool,
    /// Print the measurement as JSON
    #[arg(long)]
    pub json: bool,
    /// Write the report to FILE instead of stderr
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The command to run, with its arguments (after `--`)
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<OsString>,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let (run, note) = match rusage::run(&args.command) {
        Ok(measured) => measured,
        Err(err @ RunError::CannotStart { .. }) => {
            eprintln!("kdiag: {err}");
            return Ok(err.exit_code());
        }
        Err(err) => return Err(err.into()),
    };

    let mut buf = Vec::new();
    if args.json {
        crate::render::json(&mut buf, &run)?;
    } else if args.verbose {
        crate::render::time::write_verbose(&mut buf, &run, note.as_deref())?;
    } else {
        crate::render::time::write_summary(&mut buf, &run, note.as_deref())?;
    }
    match &args.output {
        Some(path) => {
            crate::user_files::write(path, &buf)?;
        }
        None => std::io::stderr().write_all(&buf)?,
    }
    Ok(run.ending.exit_code())
}
