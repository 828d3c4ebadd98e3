//! Block I/O tracing for iosnoop: the BPF tier (`bpf.rs`, requests keyed by
//! their kernel pointer, in-kernel histograms) and the perf tier (`perf.rs`,
//! tracepoints matched by (dev, sector)), both yielding `model::block::BlockIo`.

pub mod bpf;
pub mod perf;
pub mod source;

pub use source::{BlockSource, Options};

use crate::instruments::{self, Tier};
use crate::sys::disks;

/// Open the requested tier; the note says why `auto` fell back, if it did.
pub fn open(
    tier: Tier,
    options: Options,
) -> anyhow::Result<(Box<dyn BlockSource>, Option<String>)> {
    let names = disks::names();
    let perf_names = names.clone();
    instruments::open(
        tier,
        || Ok(Box::new(bpf::BlockBpf::start(options, names)?) as Box<dyn BlockSource>),
        || Ok(Box::new(perf::BlockPerf::start(options, perf_names)?) as Box<dyn BlockSource>),
    )
}
