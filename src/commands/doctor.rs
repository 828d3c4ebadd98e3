//! `kdiag doctor`: probe what this machine allows and say which tier each
//! kdiag feature uses here.

use crate::model::capability::DoctorReport;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Every probe is real: kdiag loads trivial BPF programs, opens perf \
                        events and reads the sysctls. Nothing stays loaded or attached. \
                        Exit status 0 once the probes ran, whatever they found."
)]
pub struct Args {
    /// Print the probes and features as JSON
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let probes = crate::instruments::doctor::probe_all();
    let features = crate::instruments::doctor::features::features(&probes);
    let report = DoctorReport { probes, features };
    let mut out = std::io::stdout().lock();
    if args.json {
        crate::render::json(&mut out, &report)?;
    } else {
        crate::render::doctor::write(&mut out, &report)?;
    }
    Ok(crate::error::OK)
}
