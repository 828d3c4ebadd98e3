//! `kdiag offcpu`'s collectors: where threads wait, and for how long.
//!
//! - `bpf`: the BPF tier, offcpu.bpf.c on sched_switch, aggregating blocked
//!   time by stacks in the kernel. `Tracer` pairs it with a perf sideband
//!   (task records only) so user frames of processes that exit before the
//!   end still symbolize, and hands both to the profile's `Recorder`.
//! - `fallback`: the coarse tier, wait channels and syscalls sampled from
//!   /proc, for machines where BPF cannot attach. It never shows stacks.

pub mod bpf;
pub mod fallback;

use std::collections::HashSet;
use std::time::Duration;

use anyhow::Context;

use crate::instruments::profile::symbolize::{CountedStack, Half, RecordOptions, Recorder};
use crate::model::offcpu::BlockCounts;
use crate::model::profile::{Frame, Profile, WeightUnit};
use crate::sys::perf::{EventSpec, Record, Session, Target};

pub use bpf::{Attach, Options};

/// Data pages per CPU for the sideband ring: task records are small and
/// rare (a process start is a few dozen).
const SIDEBAND_PAGES: usize = 64;

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

/// The BPF tier at work: the programs, the sideband and what it learnt.
pub struct Tracer {
    bpf: bpf::OffcpuBpf,
    sideband: Session,
    recorder: Recorder,
    /// Processes whose task records matter (None: every process).
    watched: Option<HashSet<u32>>,
    follow: bool,
    min_block_ns: u64,
}

impl Tracer {
    /// Attach the BPF programs and open the sideband. `options.tgids` that
    /// exist now have their mappings and thread names read at once.
    pub fn start(options: &Options) -> anyhow::Result<Tracer> {
        let bpf = bpf::OffcpuBpf::start(options)?;
        let sideband = Session::open(&[EventSpec::sideband()], Target::AllCpus, SIDEBAND_PAGES)
            .context("opening the sideband of process mappings")?;
        sideband.enable()?;
        let mut recorder = Recorder::new(RecordOptions::default());
        for &tgid in &options.tgids {
            recorder.capture(tgid);
            for tid in crate::sys::procfs::tids(tgid as i32) {
                if let Ok(c) = std::fs::read_to_string(format!("/proc/{tgid}/task/{tid}/comm")) {
                    recorder.name(tid as u32, c.trim_end());
                }
            }
        }
        Ok(Tracer {
            bpf,
            sideband,
            recorder,
            watched: (!options.tgids.is_empty()).then(|| options.tgids.iter().copied().collect()),
            follow: options.follow,
            min_block_ns: options.min_block_ns,
        })
    }

    /// How the switch tracepoint was attached.
    pub fn attach(&self) -> Attach {
        self.bpf.attach
    }

    /// Watch one more process: a `-- CMD` child, held before its exec,
    /// named `comm` until its exec renames it.
    pub fn watch(&mut self, tgid: u32, comm: &str) -> anyhow::Result<()> {
        self.bpf.watch(tgid)?;
        self.recorder.name(tgid, comm);
        if let Some(w) = &mut self.watched {
            w.insert(tgid);
        }
        Ok(())
    }

    /// Wait up to `timeout` for sideband records, and take them.
    pub fn poll(&mut self, timeout: Duration) -> anyhow::Result<()> {
        self.sideband.poll(timeout)?;
        self.drain();
        Ok(())
    }

    fn drain(&mut self) {
        let (watched, follow, recorder) = (&mut self.watched, self.follow, &mut self.recorder);
        self.sideband.drain(|rec| {
            let pid = match rec {
                Record::Fork { pid, ppid, .. } => {
                    if let Some(w) = watched.as_mut()
                        && follow
                        && w.contains(&ppid)
                    {
                        w.insert(pid);
                    }
                    pid
                }
                Record::Comm { pid, .. } | Record::Mmap2 { pid, .. } => pid,
                _ => return,
            };
            if watched.as_ref().is_none_or(|w| w.contains(&pid)) {
                recorder.record(&rec);
            }
        });
    }

    /// Stop recording, read the kernel's tables once and symbolize: the
    /// profile's stacks (weights in ns blocked), and the counters. Every
    /// program is detached before the tables are read.
    pub fn finish(mut self, profile: &mut Profile) -> anyhow::Result<BlockCounts> {
        let end_ns = self.bpf.stop()?;
        self.sideband.disable()?;
        self.drain();
        let mut counts = self.bpf.counts()?;
        let (blocks, in_progress) = self.bpf.collect(end_ns, self.min_block_ns)?;
        counts.in_progress = in_progress;
        for b in &blocks {
            self.recorder.add_stack(CountedStack {
                pid: b.tgid,
                tid: b.tid,
                state: Some(b.state),
                kernel: half(&b.kernel, "[kernel stack lost]"),
                user: half(&b.user, "[user stack lost]"),
                count: b.count,
                weight: b.total_ns,
            });
        }
        profile.unit = WeightUnit::Nanoseconds;
        profile.lost = counts.stacks_lost();
        self.recorder.finish(profile);
        for s in &mut profile.stacks {
            trim_machinery(&mut s.frames);
        }
        Ok(counts)
    }
}

/// Drop the tracing machinery the kernel stack may still start with (the
/// program skips only the frames every kernel has): everything the
/// scheduler called to run the tracepoint, inside `__schedule`.
fn trim_machinery(frames: &mut Vec<Frame>) {
    if let Some(i) = frames
        .iter()
        .rposition(|f| f.kernel && f.name == "__schedule")
    {
        frames.truncate(i + 1);
        return;
    }
    while frames.last().is_some_and(|f| {
        f.kernel
            && ["bpf_", "__bpf_trace_", "__traceiter_"]
                .iter()
                .any(|p| f.name.starts_with(p))
    }) {
        frames.pop();
    }
}

fn half<'a>(c: &'a bpf::Captured, lost: &'static str) -> Half<'a> {
    match c {
        bpf::Captured::Ips(ips) => Half::Ips(ips),
        bpf::Captured::Absent => Half::Ips(&[]),
        bpf::Captured::Lost => Half::Lost(lost),
        bpf::Captured::Unreadable => Half::Lost("[user stack unreadable]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_what_ran_inside_the_scheduler() {
        let k = Frame::kernel;
        let mut f = vec![
            Frame::user("main"),
            k("schedule"),
            k("__schedule"),
            k("__traceiter_sched_switch"),
        ];
        trim_machinery(&mut f);
        assert_eq!(f.last(), Some(&k("__schedule")));
        let mut f = vec![Frame::user("main"), k("pick"), k("bpf_trace_run4")];
        trim_machinery(&mut f);
        assert_eq!(f, [Frame::user("main"), k("pick")]);
    }
}
