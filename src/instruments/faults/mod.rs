//! `kdiag faults`' collectors: page faults of processes, by code path. Both
//! tiers give an ordinary profile weighted by fault counts
//! (`WeightUnit::Events`, event `page-faults`), so every profile renderer
//! draws it.
//!
//! - `bpf`: faults.bpf.c on x86's page_fault_user tracepoint, counting
//!   faults in the kernel by (thread, user stack).
//! - `proc`: each thread's minflt + majflt from /proc over the window, for
//!   machines where BPF cannot attach: one frame per thread, no code paths.

pub mod bpf;
pub mod proc;

use crate::instruments::{self, Ask, Fallback, ProfileSource, Tier};

/// faults' tiers.
pub const TIERS: instruments::Tiers = instruments::Tiers {
    name: "faults",
    auto: "BPF where the kernel allows it, else /proc's counters",
    rows: &[
        instruments::TierRow {
            tier: Tier::Bpf,
            sees: "page_fault_user BPF program (x86): every user-mode fault by user stack",
            works: |p| p.btf.is_ok() && p.bpf_tp_btf.is_ok(),
        },
        instruments::TierRow {
            tier: Tier::Procfs,
            sees: "each thread's fault counters read from /proc, no stacks",
            works: |_| true,
        },
    ],
};

/// The event a faults profile counts.
pub const EVENT: &str = "page-faults";

/// Open the tier asked for on `pids` (and, with `follow`, the children
/// they start): BPF, else (with `auto`) /proc, saying why.
pub fn open(
    ask: Ask,
    pids: &[i32],
    follow: bool,
) -> anyhow::Result<(Box<ProfileSource>, Option<Fallback>)> {
    let tgids: &[u32] = &pids.iter().map(|&p| p as u32).collect::<Vec<_>>();
    instruments::open(
        ask,
        vec![
            (
                Tier::Bpf,
                Box::new(|| {
                    Ok(Box::new(bpf::FaultsBpf::start(tgids, follow)?) as Box<ProfileSource>)
                }),
            ),
            (
                Tier::Procfs,
                Box::new(|| Ok(Box::new(proc::FaultsProc::start(tgids)) as Box<ProfileSource>)),
            ),
        ],
    )
}
