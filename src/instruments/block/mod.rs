//! Block I/O tracing for iosnoop: the BPF tier (`bpf.rs`, requests keyed by
//! their kernel pointer, in-kernel histograms) and the perf tier (`perf.rs`,
//! tracepoints matched by (dev, sector)), both yielding `model::block::BlockIo`.

pub mod bpf;
pub mod matcher;
pub mod perf;
pub mod source;

pub use source::{BlockSource, Options};

use crate::instruments::{self, Ask, Fallback, Tier};
use crate::sys::disks;

/// iosnoop's tiers.
pub const TIERS: instruments::Tiers = instruments::Tiers {
    name: "iosnoop",
    auto: "BPF where the kernel allows it, else perf",
    rows: &[
        instruments::TierRow {
            tier: Tier::Bpf,
            sees: "tp_btf block_rq_* BPF programs: requests matched exactly, with queue time",
            works: |p| p.bpf_tp_btf.is_ok(),
        },
        instruments::TierRow {
            tier: Tier::Perf,
            sees: "perf_event_open tracepoints: issue and completion paired by (dev, sector), \
                   merged requests may mismatch",
            works: |p| p.perf_tracepoint.is_ok(),
        },
    ],
};

/// The disk a `--device` names (vda, /dev/vda, 254,0): a partition's is
/// the disk holding it, which block tracepoints report.
pub fn device(spec: &str) -> anyhow::Result<disks::Resolved> {
    disks::resolve(spec, &disks::list()?)
}

/// Open the requested tier, and why `auto` fell back, if it did.
pub fn open(
    ask: Ask,
    options: Options,
) -> anyhow::Result<(Box<dyn BlockSource>, Option<Fallback>)> {
    let names = disks::names();
    let perf_names = names.clone();
    let mut tiers: Vec<instruments::Opener<'_, dyn BlockSource>> = vec![(
        Tier::Bpf,
        Box::new(|| Ok(Box::new(bpf::BlockBpf::start(options, names)?) as Box<dyn BlockSource>)),
    )];
    // The perf tier's tracepoints see every user's requests: one user's
    // are traced with BPF or not at all.
    if options.uid.is_none() {
        tiers.push((
            Tier::Perf,
            Box::new(|| {
                Ok(Box::new(perf::BlockPerf::start(options, perf_names)?) as Box<dyn BlockSource>)
            }),
        ));
    } else if ask == Ask::Only(Tier::Perf) {
        return Err(crate::error::usage(
            "the perf tier traces every user's block requests: yours are traced with BPF \
             (--tier bpf or auto)",
        ));
    }
    instruments::open(ask, tiers)
}

/// Every block request completed over `window` (cut short when `stop` is
/// set), on the best tier: what `kdiag iosnoop --summary` records, for
/// callers that want it in one piece (diagnose's drill-down). Returns the
/// requests, the tier and the events lost; everything is detached before
/// it returns. For one user (`scope`), only the requests charged to their
/// processes are traced, as their iosnoop traces them.
pub fn record(
    scope: super::target::Scope,
    window: std::time::Duration,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<(Vec<crate::model::block::BlockIo>, Tier, u64)> {
    let options = Options {
        uid: scope.uid(),
        ..Options::default()
    };
    let (mut source, _) = open(Ask::Auto, options)?;
    let mut ios = Vec::new();
    super::for_window(window, stop, |wait| source.poll(wait, &mut ios))?;
    source.finish(&mut ios)?;
    Ok((ios, source.tier(), source.lost()))
}
