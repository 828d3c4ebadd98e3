//! The BPF tier of `kdiag faults`: faults.bpf.c on x86's page_fault_user
//! tracepoint (tp_btf), filtered in the kernel by the watch bitmap and
//! counted there by (tgid, tid, the user stack's addresses: exact keys,
//! so no code path is lost to a stack map's hash collision). User space
//! reads the counts once, at the end, and names the stacks with the perf
//! sideband's mappings (`instruments::profile::sideband`), as offcpu's BPF
//! tier does.
//!
//! Every kernel resource is owned by the `aya::Ebpf` handle: dropping
//! `FaultsBpf`, or the process dying by any signal, detaches everything.

use std::time::Duration;

use anyhow::Context;
use aya::maps::HashMap as BpfHashMap;

use crate::instruments::profile::sideband::Sideband;
use crate::instruments::profile::symbolize::{CountedStack, Half, RecordOptions};
use crate::instruments::{ReportSource, Tier};
use crate::model::profile::{Profile, WeightUnit};

/// `MAX_DEPTH` of faults.bpf.c: the innermost frames a key keeps.
const MAX_DEPTH: usize = 63;

/// `struct fault_key` of faults.bpf.c.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    tgid: u32,
    pid: u32,
    /// Innermost first; zero after the last frame.
    ips: [u64; MAX_DEPTH],
}

// SAFETY: a plain C struct of integers without padding (checked below).
unsafe impl aya::Pod for Key {}
const _: () = assert!(size_of::<Key>() == 512);

/// Indexes of the `counters` map (`enum counter`).
const C_TABLE_FULL: u32 = 1;

/// The loaded, attached programs, and the sideband naming their stacks.
pub struct FaultsBpf {
    ebpf: crate::sys::bpf::Loaded,
    /// Programs attached, by name, until `finish`.
    attached: Vec<&'static str>,
    sideband: Sideband,
}

impl FaultsBpf {
    /// Load the programs, fill the watch bitmap (`tgids`; empty: every
    /// process), attach, and open the sideband.
    pub fn start(tgids: &[u32], follow: bool) -> anyhow::Result<FaultsBpf> {
        let filter_on = !tgids.is_empty() as u8;
        let mut ebpf = crate::sys::bpf::load_with(
            crate::sys::bpf::objects::FAULTS,
            "page-fault tracing with BPF",
            &[("filter_on", &[filter_on])],
            &[("watched", crate::sys::bpf::watch_words()?)],
        )?;
        crate::sys::bpf::watch_all(&mut ebpf, tgids)?;
        let btf = crate::sys::bpf::btf_for_core()?;
        let mut programs = vec![("faults_user", "page_fault_user")];
        if follow && filter_on != 0 {
            programs.push(("faults_fork", "sched_process_fork"));
        }
        let mut attached = Vec::new();
        for (prog, tp) in programs {
            // page_fault_user is x86's: other architectures have no such
            // tracepoint, and the error says so.
            crate::sys::bpf::attach_tp_btf(&mut ebpf, "faults.bpf.o", prog, tp, btf)?;
            attached.push(prog);
        }
        let sideband = Sideband::open(tgids, follow, RecordOptions::default())?;
        Ok(FaultsBpf {
            ebpf,
            attached,
            sideband,
        })
    }

    /// Detach every program; the maps stay readable.
    fn stop(&mut self) -> anyhow::Result<()> {
        for name in std::mem::take(&mut self.attached) {
            let prog = self.ebpf.program_mut(name).context("program vanished")?;
            // Its run time, before unloading closes it.
            crate::sys::bpf::count(prog);
            if let aya::programs::Program::BtfTracePoint(p) = prog {
                p.unload()?;
            }
        }
        Ok(())
    }
}

impl ReportSource<Profile> for FaultsBpf {
    fn tier(&self) -> Tier {
        Tier::Bpf
    }

    fn watch(&mut self, tgid: u32, comm: &str) -> anyhow::Result<()> {
        crate::sys::bpf::watch(&mut self.ebpf, tgid)?;
        self.sideband.watch(tgid, comm);
        Ok(())
    }

    fn poll(&mut self, timeout: Duration) -> anyhow::Result<()> {
        self.sideband.poll(timeout)
    }

    fn finish(mut self: Box<Self>, profile: &mut Profile) -> anyhow::Result<()> {
        self.stop()?;
        self.sideband.stop()?;
        let faults: BpfHashMap<_, Key, u64> =
            BpfHashMap::try_from(self.ebpf.map("faults").context("no faults map")?)?;
        let mut counted = Vec::new();
        for entry in faults.iter() {
            counted.push(entry.context("reading the fault counts")?);
        }
        let recorder = self.sideband.recorder();
        for (k, n) in &counted {
            let depth = k.ips.iter().position(|&ip| ip == 0).unwrap_or(MAX_DEPTH);
            recorder.add_stack(CountedStack {
                pid: k.tgid,
                tid: k.pid,
                state: None,
                // The fault entry, the same for every fault: not walked.
                kernel: Half::Ips(&[]),
                user: match depth {
                    0 => Half::Lost("[user stack unreadable]"),
                    d => Half::Ips(&k.ips[..d]),
                },
                count: *n,
                weight: *n,
                waker: None,
                ongoing: false,
                times: &[],
            });
        }
        profile.unit = WeightUnit::Events;
        profile.event = super::EVENT.into();
        // Faults dropped: the table had no room for their path.
        profile.lost = crate::sys::bpf::counter(&self.ebpf, C_TABLE_FULL)?;
        profile.collection = Some(
            "BPF, tp_btf/page_fault_user: every fault in user mode, counted in the kernel by \
             thread and user stack (its innermost 63 frames)"
                .into(),
        );
        profile.notes.push(
            "faults the kernel takes on a process's behalf (reading into its buffers in a \
             system call) are not counted: they happen in kernel mode"
                .into(),
        );
        self.sideband.into_recorder().finish(profile);
        Ok(())
    }
}
