//! `kdiag profile`'s stages: samples recorded through `sys::perf`, user
//! stacks unwound (`unwind`, over the binaries' tables in `modules`), then
//! frames named (`symbolize`: kernel frames from kallsyms, user frames by
//! (file, offset) through blazesym; JIT code through `perf_map` and
//! `jitdump`; a HotSpot JVM asked for its map first by `jvm_perf_map`;
//! CPython 3.11's Python functions read from its memory by `python_stacks`).

pub mod jitdump;
pub mod jvm_perf_map;
pub mod modules;
mod names;
pub mod perf_map;
pub mod python_stacks;
pub mod sideband;
pub mod symbolize;
pub mod unwind;

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::model::profile::Profile;
use crate::sys::perf::{EventSpec, NoHardwareCounter, Session, Target};
use symbolize::{RecordOptions, Recorder};

/// profile's one tier: perf samples with callchains (in-kernel stack
/// counting would be a BPF tier; at profiling rates callchains per sample
/// are cheap enough).
pub const TIERS: super::Tiers = super::Tiers {
    name: "profile",
    auto: "perf",
    rows: &[super::TierRow {
        tier: super::Tier::Perf,
        sees: "callchain samples of user and kernel stacks",
        works: |p| p.cpu_clock.is_ok(),
    }],
};
use unwind::CallGraph;

/// Data pages per CPU ring of the command: ~1 MiB, room for ~4000
/// deep-stack samples.
const RING_PAGES: usize = 256;
/// Samples a ring holds when each carries a stack copy: at 999 Hz, a
/// quarter of a second before the ring is full.
const RING_STACK_SAMPLES: usize = 256;
/// Data pages per CPU ring of a drill-down or panel (cpu-clock, no copies).
const SMALL_RING_PAGES: usize = 64;

/// What to sample: the profile command fills every field; [`Request::clock`]
/// is the drill-downs' and the lab panel's (cpu-clock, kernel and user
/// stacks by frame pointers).
#[derive(Debug, Clone, Copy)]
pub struct Request {
    /// Samples per second per CPU.
    pub freq: u64,
    /// Try the hardware cycles event first (else cpu-clock only).
    pub cycles: bool,
    pub call_graph: CallGraph,
    /// Bytes of user stack copied per sample (dwarf/auto), if any.
    pub stack_size: Option<u32>,
    pub user_only: bool,
    pub kernel_only: bool,
    pub include_idle: bool,
    /// Events switch on when the (held) target execs.
    pub on_exec: bool,
    /// Keep each thread's stacks apart (`Profile::threads`).
    pub per_thread: bool,
}

impl Request {
    /// cpu-clock at `freq`, frame-pointer stacks, small rings.
    pub fn clock(freq: u64) -> Request {
        Request {
            freq,
            cycles: false,
            call_graph: CallGraph::Fp,
            stack_size: None,
            user_only: false,
            kernel_only: false,
            include_idle: false,
            on_exec: false,
            per_thread: false,
        }
    }
}

/// A running CPU profile: the perf session (its one tier) and the recorder
/// its samples go to. Dropping it closes every event.
pub struct CpuSampler {
    session: Session,
    recorder: Recorder,
    request: Request,
    /// The event used (`cycles` or `cpu-clock`) and why not cycles.
    event: String,
    event_note: Option<String>,
    /// Processes whose mappings are read at once (`-p PID`).
    captured: Vec<u32>,
}

/// Open the sampling events on `pid` (None: every CPU) and enable them
/// (with `on_exec`, they switch on at the held target's exec): hardware
/// cycles where asked and the machine has a PMU, else cpu-clock, with a
/// note saying why.
pub fn open(request: Request, pid: Option<i32>) -> anyhow::Result<CpuSampler> {
    open_on(request, pid.as_slice())
}

/// [`open`] on several processes at once, one ring per CPU for all their
/// threads (diagnose's drill-down on the members that carry its verdict);
/// none: every CPU.
pub fn open_on(request: Request, pids: &[i32]) -> anyhow::Result<CpuSampler> {
    let session = |spec: &EventSpec, pages| match pids {
        [] => Session::open(std::slice::from_ref(spec), Target::AllCpus, pages),
        pids => Session::open_processes(std::slice::from_ref(spec), pids, pages),
    };
    let shape = |spec: EventSpec| {
        let mut spec = spec.with_callchain().with_task_events();
        if let Some(bytes) = request.stack_size {
            spec = spec.with_user_stack(bytes);
            if request.call_graph == CallGraph::Dwarf {
                spec = spec.without_user_callchain();
            }
        }
        if request.on_exec {
            spec = spec.with_enable_on_exec();
        }
        if request.user_only {
            spec = spec.user_only();
        }
        if request.kernel_only {
            spec = spec.kernel_only();
        }
        spec
    };
    let pages = match request.stack_size {
        Some(bytes) => {
            let record = bytes as usize + 1024;
            (RING_STACK_SAMPLES * record / crate::sys::page_size() as usize).max(RING_PAGES)
        }
        None if request.cycles => RING_PAGES,
        None => SMALL_RING_PAGES,
    };
    let clock = shape(EventSpec::cpu_clock(request.freq));
    let (session, event, event_note) = if request.cycles {
        let cycles = shape(EventSpec::cycles(request.freq));
        match session(&cycles, pages) {
            Ok(s) => (s, cycles.name(), None),
            // No PMU (a VM): cpu-clock, as bcc's profile does. Any other
            // refusal is retried with cpu-clock too, so the error names the
            // event every machine has.
            Err(e) => {
                let note = if e.downcast_ref::<NoHardwareCounter>().is_some() {
                    "no hardware PMU here, so no cycles event".into()
                } else {
                    format!("cycles unavailable: {e:#}")
                };
                let s = session(&clock, pages)?;
                (s, clock.name(), Some(note))
            }
        }
    } else {
        let s = session(&clock, pages)?;
        (s, clock.name(), None)
    };
    if !request.on_exec {
        session.enable()?;
    }
    let mut sampler = CpuSampler {
        session,
        recorder: Recorder::new(RecordOptions::default()),
        request,
        event: event.into(),
        event_note,
        captured: pids.iter().map(|&p| p as u32).collect(),
    };
    sampler.recorder = sampler.new_recorder();
    Ok(sampler)
}

impl CpuSampler {
    fn new_recorder(&self) -> Recorder {
        let mut recorder = Recorder::new(RecordOptions {
            include_idle: self.request.include_idle,
            user_only: self.request.user_only,
            kernel_only: self.request.kernel_only,
            call_graph: self.request.call_graph,
            per_thread: self.request.per_thread,
        });
        for &pid in &self.captured {
            recorder.capture(pid);
        }
        recorder
    }

    /// Name a held command's process until its exec renames it.
    pub fn name(&mut self, pid: u32, comm: &str) {
        self.recorder.name(pid, comm);
    }

    /// Wait up to `timeout` for samples, and take them.
    pub fn poll(&mut self, timeout: Duration) -> anyhow::Result<()> {
        self.session.poll(timeout)?;
        let recorder = &mut self.recorder;
        self.session.drain(|r| recorder.record(&r));
        Ok(())
    }

    /// Stop sampling and take what is still in the rings.
    pub fn stop(&mut self) -> anyhow::Result<()> {
        self.session.disable()?;
        let recorder = &mut self.recorder;
        self.session.drain(|r| recorder.record(&r));
        Ok(())
    }

    /// The samples taken since the last window, symbolized into `p` (with
    /// the event, the rate and the records lost); sampling goes on into a
    /// new window.
    pub fn window(&mut self, p: &mut Profile) {
        let fresh = self.new_recorder();
        let recorder = std::mem::replace(&mut self.recorder, fresh);
        self.fill(p);
        recorder.finish(p);
    }

    /// Close the events and symbolize every sample into `p`.
    pub fn finish(self, p: &mut Profile) {
        self.fill(p);
        drop(self.session);
        self.recorder.finish(p);
    }

    fn fill(&self, p: &mut Profile) {
        let losses = self.session.losses();
        p.event.clone_from(&self.event);
        p.event_note.clone_from(&self.event_note);
        p.freq_hz = self.request.freq;
        p.lost = losses.lost;
        p.throttled = losses.throttled;
    }
}

/// profile's one tier as any source: what `kdiag profile` traces through.
impl super::ReportSource<Profile> for CpuSampler {
    fn tier(&self) -> super::Tier {
        super::Tier::Perf
    }

    fn watch(&mut self, tgid: u32, comm: &str) -> anyhow::Result<()> {
        // Opened on the held command already: only its name until its exec.
        self.name(tgid, comm);
        Ok(())
    }

    fn poll(&mut self, timeout: Duration) -> anyhow::Result<()> {
        CpuSampler::poll(self, timeout)
    }

    fn stop(&mut self) -> anyhow::Result<()> {
        CpuSampler::stop(self)
    }

    fn reads_target(&self) -> bool {
        false
    }

    fn finish(self: Box<Self>, p: &mut Profile) -> anyhow::Result<()> {
        CpuSampler::finish(*self, p);
        Ok(())
    }
}

/// The CPU profile of `pid`, its threads and the children it starts, over
/// `window` at `hz` (cpu-clock, kernel and user stacks), cut short when
/// `stop` is set: what `kdiag profile -p PID -d SECS` records, for callers
/// that want it in one piece (diagnose's drill-down).
pub fn sample(pid: i32, hz: u64, window: Duration, stop: &AtomicBool) -> anyhow::Result<Profile> {
    sample_all(&[pid], hz, window, stop)
}

/// `sample` of several processes at once, into one profile (diagnose's
/// drill-down on the members of a tree that carry its verdict).
pub fn sample_all(
    pids: &[i32],
    hz: u64,
    window: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<Profile> {
    let mut sampler = open_on(Request::clock(hz), pids)?;
    let start = Instant::now();
    super::for_window(window, stop, |wait| sampler.poll(wait))?;
    let mut p = Profile {
        target: target_name(pids),
        ..Default::default()
    };
    p.cost.wall_secs = start.elapsed().as_secs_f64();
    sampler.finish(&mut p);
    Ok(p)
}

/// `PID 42 (burn)`, or `PIDs 42 (burn), 43 (burn)`: what a profile of
/// `pids` covers.
pub fn target_name(pids: &[i32]) -> String {
    let named: Vec<String> = pids
        .iter()
        .map(|&p| format!("{p} ({})", super::target::comm_of(p)))
        .collect();
    format!(
        "PID{} {}",
        if pids.len() == 1 { "" } else { "s" },
        named.join(", ")
    )
}
