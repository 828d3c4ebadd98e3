//! `kdiag man`: print the man page (roff) on standard output.

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args, app: clap::Command) -> anyhow::Result<u8> {
    let man = clap_mangen::Man::new(app);
    man.render(&mut std::io::stdout())?;
    Ok(crate::error::OK)
}
