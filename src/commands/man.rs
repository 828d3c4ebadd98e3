//! `kdiag man`: print the man page (roff) on standard output.

use clap::CommandFactory;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<u8> {
    let man = clap_mangen::Man::new(crate::cli::Cli::command());
    man.render(&mut std::io::stdout())?;
    Ok(crate::error::OK)
}
