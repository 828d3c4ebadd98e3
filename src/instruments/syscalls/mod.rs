//! `kdiag syscalls`' collectors: a process's system calls by number.
//!
//! - `bpf`: syscalls.bpf.c on the raw_syscalls tracepoints, counting and
//!   timing every call in the kernel.
//! - `proc`: each thread's /proc/PID/task/TID/syscall sampled every few ms,
//!   for machines where BPF cannot attach: the calls threads block in, no
//!   times.

pub mod bpf;
pub mod proc;

use crate::instruments::{self, Ask, Fallback, ReportSource, Tier};
use crate::model::syscalls::{Call, Syscalls};

/// syscalls' tiers.
pub const TIERS: instruments::Tiers = instruments::Tiers {
    name: "syscalls",
    auto: "BPF where the kernel allows it, else /proc's samples",
    rows: &[
        instruments::TierRow {
            tier: Tier::Bpf,
            sees: "tp_btf sys_enter/sys_exit BPF programs: every call counted and timed in the \
                   kernel",
            works: |p| p.btf.is_ok() && p.bpf_tp_btf.is_ok(),
        },
        instruments::TierRow {
            tier: Tier::Procfs,
            sees: "each thread's /proc syscall file sampled every 5 ms: the calls threads block \
                   in, no times",
            works: |_| true,
        },
    ],
};

/// Open the tier asked for on `pids` (and, with `follow`, the children
/// they start): BPF, else (with `auto`) /proc, saying why.
pub fn open(
    ask: Ask,
    pids: &[i32],
    follow: bool,
) -> anyhow::Result<(Box<dyn ReportSource<Syscalls>>, Option<Fallback>)> {
    let tgids: &[u32] = &pids.iter().map(|&p| p as u32).collect::<Vec<_>>();
    instruments::open(
        ask,
        vec![
            (
                Tier::Bpf,
                Box::new(|| {
                    Ok(Box::new(bpf::SyscallsBpf::start(tgids, follow)?)
                        as Box<dyn ReportSource<Syscalls>>)
                }),
            ),
            (
                Tier::Procfs,
                Box::new(|| {
                    Ok(Box::new(proc::SyscallsProc::start(tgids))
                        as Box<dyn ReportSource<Syscalls>>)
                }),
            ),
        ],
    )
}

/// A line for call `nr`, named from this architecture's table.
fn call(nr: i64, count: u64) -> Call {
    Call {
        nr,
        name: crate::sys::procfs::syscalls::name(nr)
            .map_or_else(|| format!("syscall {nr}"), String::from),
        count,
        ..Call::default()
    }
}
