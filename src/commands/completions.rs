//! `kdiag completions SHELL`: print a completion script for bash, zsh or fish.

use clap_complete::Shell;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell to generate completions for
    #[arg(value_enum)]
    shell: Shell,
}

pub fn run(args: Args, mut cmd: clap::Command) -> anyhow::Result<u8> {
    clap_complete::generate(args.shell, &mut cmd, "kdiag", &mut std::io::stdout());
    Ok(crate::error::OK)
}
