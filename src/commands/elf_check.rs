//! `kdiag elf-check FILE`: check an executable against the rules of the
//! Linux ELF loader and elf(5), and say what execve will do with it.

use std::io::Write;
use std::path::PathBuf;

use crate::analysis::elf_rules;
use crate::error;
use crate::instruments;
use crate::render;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file to check (an ELF executable, or a #! script); only its headers and interpreter path are read, whatever its size
    pub file: PathBuf,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
}

/// Exit 0 when the file is clean, 1 when problems were found, 2 when it
/// cannot be read (missing, not a regular file, not readable by the user).
pub fn run(args: Args) -> anyhow::Result<u8> {
    let (image, env) = instruments::elf::read_target(&args.file)?;
    let report = elf_rules::check(&image, &env);
    let mut out = std::io::stdout().lock();
    if args.json {
        render::json(&mut out, &report)?;
    } else {
        render::elf::report(&mut out, &args.file.display().to_string(), &report)?;
    }
    out.flush()?;
    Ok(if report.problems.is_empty() {
        error::OK
    } else {
        error::FAILURE
    })
}
