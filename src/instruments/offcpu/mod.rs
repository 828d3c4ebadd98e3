//! `kdiag offcpu`'s collectors: where threads wait, and for how long.
//!
//! - `source`: the options, and what both tiers found (`Found`) beside the
//!   profile: each is a `ProfileSource<Found>`.
//! - `bpf`: the BPF tier, offcpu.bpf.c on sched_switch, aggregating blocked
//!   time by stacks in the kernel. `Tracer` pairs it with a perf sideband
//!   (task records only) so user frames of processes that exit before the
//!   end still symbolize, and hands both to the profile's `Recorder`.
//! - `proc`: the procfs tier, wait channels and syscalls sampled from /proc,
//!   for machines where BPF cannot attach. It never shows stacks.

pub mod bpf;
pub mod proc;
pub mod source;
mod trim;

use std::time::Duration;

use crate::instruments::{self, Ask, Fallback, ProfileSource, Tier};
use crate::model::profile::Profile;

pub use bpf::{Attach, OffcpuBpf, Tracer};
pub use source::{Found, Options};

/// offcpu's tiers (also `profile --wall`'s off-CPU half).
pub const TIERS: instruments::Tiers = instruments::Tiers {
    name: "offcpu",
    auto: "BPF where the kernel allows it, else the coarse /proc view",
    rows: &[
        instruments::TierRow {
            tier: Tier::Bpf,
            sees: "sched_switch BPF programs: blocked time by stacks and state, summed in the kernel",
            // tp_btf, else raw_tp: both read task_struct with CO-RE, so
            // both need the kernel's BTF.
            works: |p| p.btf.is_ok() && (p.bpf_tp_btf.is_ok() || p.bpf_tracepoint.is_ok()),
        },
        instruments::TierRow {
            tier: Tier::Procfs,
            sees: "wait channels and syscalls sampled from /proc every 10 ms, no stacks",
            works: |_| true,
        },
    ],
};

/// Open the tier asked for: BPF, else (with `auto`, and unless the caller
/// needs stacks, which only BPF records) the /proc sampler, saying why.
pub fn open(
    ask: Ask,
    options: &Options,
    needs_stacks: bool,
) -> anyhow::Result<(Box<ProfileSource<Found>>, Option<Fallback>)> {
    let mut tiers: Vec<instruments::Opener<'_, ProfileSource<Found>>> = vec![(
        Tier::Bpf,
        Box::new(|| Ok(Box::new(Tracer::start(options)?) as Box<ProfileSource<Found>>)),
    )];
    if !needs_stacks {
        tiers.push((
            Tier::Procfs,
            Box::new(|| Ok(Box::new(proc::OffcpuProc::new(options)) as Box<ProfileSource<Found>>)),
        ));
    }
    instruments::open(ask, tiers)
}

/// Where `pid` and the children it starts wait off the CPU, over `window`
/// (cut short when `stop` is set): blocks of a microsecond and more, as
/// `kdiag offcpu -p PID -d SECS` records them; the programs are attached
/// for the window and detached before it returns. The profile's weights
/// are nanoseconds blocked.
pub fn record(
    pid: i32,
    window: Duration,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<(Profile, Attach)> {
    record_all(&[pid], window, stop)
}

/// `record` of several processes at once (and the children they start),
/// into one profile: diagnose's drill-down on the members of a tree that
/// carry its verdict, filtered in the kernel by their tgids.
pub fn record_all(
    pids: &[i32],
    window: Duration,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<(Profile, Attach)> {
    let options = Options {
        tgids: pids.iter().map(|&p| p as u32).collect(),
        follow: true,
        min_block_ns: 1_000,
        states: crate::model::offcpu::StateFilter::All,
        per_thread: false,
        wakers: false,
    };
    let mut tracer = Tracer::start(&options)?;
    let attach = tracer.attach();
    let start = std::time::Instant::now();
    super::for_window(window, stop, |wait| tracer.poll(wait))?;
    let mut p = Profile {
        target: crate::instruments::profile::target_name(pids),
        ..Default::default()
    };
    p.cost.wall_secs = start.elapsed().as_secs_f64();
    tracer.finish(&mut p)?;
    Ok((p, attach))
}
