//! `kdiag profile --wall`'s collector: the two instruments that already
//! exist, opened together on the same targets, each keeping threads apart.
//! The CPU half is `profile`'s sampler (cpu-clock, so a sample weighs its
//! period in nanoseconds); the off-CPU half is `offcpu`'s source (BPF
//! sched_switch summed in the kernel, else the /proc sampler without
//! stacks). `analysis::wall` merges what they found.

use std::time::Duration;

use crate::instruments::offcpu::{self, Found};
use crate::instruments::profile::{self, CpuSampler, Request};
use crate::instruments::{Ask, Fallback, ProfileSource, ReportSource, Tier};
use crate::model::offcpu::{Collection, StateFilter, WaitSamples};
use crate::model::profile::{Profile, WeightUnit};

/// Both halves at work. Dropping it closes every event and detaches every
/// program.
pub struct Recording {
    cpu: CpuSampler,
    off: Box<ProfileSource<Found>>,
    /// When the CPU half stopped (CLOCK_MONOTONIC ns), once it has.
    end_ns: Option<u64>,
    /// Why the off-CPU half runs on /proc, when it does.
    pub fallback: Option<Fallback>,
}

/// What both halves found.
pub struct Halves {
    /// cpu-clock samples per thread (weights: ns of CPU).
    pub cpu: Profile,
    /// Blocked time per thread (weights: ns), empty from /proc.
    pub off: Profile,
    /// The /proc tier's rows, when it ran.
    pub waits: Option<WaitSamples>,
    /// How the off-CPU half was collected.
    pub collection: Collection,
    /// Off-CPU blocks not placed in time (`BlockCounts::ends_lost`).
    pub lost_ends: u64,
    /// When recording ended (CLOCK_MONOTONIC ns): the CPU half had
    /// stopped, the off-CPU half stopped next, counting the blocks still
    /// going on up to then. The window ends here, not when the command
    /// decided to stop: a kdiag delayed in between would otherwise count
    /// more time than its window.
    pub end_ns: u64,
}

/// Open both halves on `pids` (their threads and the children they start;
/// none: a held `-- CMD` is added with [`Recording::watch`]). `on_exec`:
/// the CPU events switch on when the held command execs. `ask` is the
/// off-CPU half's tier (BPF, else /proc). `wakers`: the BPF tier pairs
/// each sleep with the stack of the thread that woke it.
pub fn open(
    ask: Ask,
    pids: &[i32],
    freq: u64,
    on_exec: bool,
    wakers: bool,
) -> anyhow::Result<Recording> {
    let options = offcpu::Options {
        tgids: pids.iter().map(|&p| p as u32).collect(),
        follow: true,
        min_block_ns: 0,
        states: StateFilter::All,
        per_thread: true,
        wakers,
    };
    let (off, fallback) = offcpu::open(ask, &options, false)?;
    let request = Request {
        on_exec,
        per_thread: true,
        ..Request::clock(freq)
    };
    let cpu = profile::open_on(request, pids)?;
    Ok(Recording {
        cpu,
        off,
        end_ns: None,
        fallback,
    })
}

/// Record `pids` (and the children they start) for `window`, cut short
/// when `stop` is set: both halves, per thread, without wakers, and when
/// the window began (CLOCK_MONOTONIC ns). The off-CPU half is BPF's, else
/// /proc's (with why BPF could not run).
pub fn record(
    pids: &[i32],
    freq: u64,
    window: Duration,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<(Halves, u64, Option<String>)> {
    let mut recording = open(Ask::Auto, pids, freq, false, false)?;
    let why = recording.fallback.take().map(|f| format!("{:#}", f.error));
    let origin_ns = crate::sys::monotonic_ns();
    super::for_window(window, stop, |wait| recording.poll(wait))?;
    Ok((Box::new(recording).finish(&mut ())?, origin_ns, why))
}

/// Both halves as one source (its tier: the off-CPU half's); what they
/// found comes back whole, the `()` report is nothing to fill.
impl ReportSource<(), Halves> for Recording {
    fn tier(&self) -> Tier {
        self.off.tier()
    }

    /// The CPU half must have been opened on it (`open(.., &[pid], .., true)`).
    fn watch(&mut self, pid: u32, comm: &str) -> anyhow::Result<()> {
        self.cpu.name(pid, comm);
        self.off.watch(pid, comm)
    }

    fn poll(&mut self, timeout: Duration) -> anyhow::Result<()> {
        self.off.poll(timeout)?;
        self.cpu.poll(Duration::ZERO)
    }

    fn stop(&mut self) -> anyhow::Result<()> {
        self.cpu.stop()?;
        self.end_ns = Some(crate::sys::monotonic_ns());
        Ok(())
    }

    /// Stop both halves and symbolize.
    fn finish(mut self: Box<Self>, _: &mut ()) -> anyhow::Result<Halves> {
        if self.end_ns.is_none() {
            ReportSource::stop(&mut *self)?;
        }
        let end_ns = self.end_ns.unwrap_or_default();
        let mut off = Profile {
            unit: WeightUnit::Nanoseconds,
            ..Default::default()
        };
        let found = self.off.finish(&mut off)?;
        let mut cpu = Profile::default();
        self.cpu.finish(&mut cpu);
        Ok(Halves {
            cpu,
            off,
            waits: found.waits,
            collection: found.collection,
            lost_ends: found.counts.ends_lost,
            end_ns,
        })
    }
}
