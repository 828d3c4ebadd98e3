//! `kdiag workload`: not built yet.

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<u8> {
    anyhow::bail!("kdiag workload is not built yet")
}
