//! The BPF tier of `kdiag syscalls`: syscalls.bpf.c on the raw_syscalls
//! tracepoints (tp_btf sys_enter, sys_exit), filtered in the kernel by the
//! watch bitmap and counted there per call number: calls, errors, total
//! and longest time. User space reads the tables once, at the end.
//!
//! Every kernel resource is owned by the `aya::Ebpf` handle: dropping
//! `SyscallsBpf`, or the process dying by any signal, detaches everything.

use std::time::Duration;

use anyhow::Context;
use aya::maps::{HashMap as BpfHashMap, PerCpuArray};

use crate::instruments::{ReportSource, Tier};
use crate::model::syscalls::Syscalls;

/// `MAX_NR` of syscalls.bpf.c: the call numbers `stats` holds.
const MAX_NR: u32 = 512;
/// Indexes of the `counters` map (`enum counter`).
const C_OTHER: u32 = 0;
const C_INFLIGHT_FULL: u32 = 1;

/// `struct nr_stat` of syscalls.bpf.c.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Stat {
    calls: u64,
    returned: u64,
    errors: u64,
    total_ns: u64,
    max_ns: u64,
}

/// `struct call` of syscalls.bpf.c: a call in progress.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct InFlight {
    nr: u64,
    since_ns: u64,
}

// SAFETY: plain C structs of u64s, without padding.
unsafe impl aya::Pod for Stat {}
unsafe impl aya::Pod for InFlight {}

/// The loaded, attached programs.
pub struct SyscallsBpf {
    ebpf: crate::sys::bpf::Loaded,
    /// Programs attached, by name, until `finish`.
    attached: Vec<&'static str>,
}

impl SyscallsBpf {
    /// Load the programs, fill the watch bitmap (`tgids`; empty: every
    /// process) and attach.
    pub fn start(tgids: &[u32], follow: bool) -> anyhow::Result<SyscallsBpf> {
        let filter_on = !tgids.is_empty() as u8;
        let mut ebpf = crate::sys::bpf::load_with(
            crate::sys::bpf::objects::SYSCALLS,
            "system call tracing with BPF",
            &[("filter_on", &[filter_on])],
            &[("watched", crate::sys::bpf::watch_words()?)],
        )?;
        crate::sys::bpf::watch_all(&mut ebpf, tgids)?;
        let btf = crate::sys::bpf::btf_for_core()?;
        let mut programs = vec![
            ("syscalls_enter", "sys_enter"),
            ("syscalls_exit", "sys_exit"),
            ("syscalls_thread_exit", "sched_process_exit"),
        ];
        if follow && filter_on != 0 {
            programs.push(("syscalls_fork", "sched_process_fork"));
        }
        let mut attached = Vec::new();
        for (prog, tp) in programs {
            crate::sys::bpf::attach_tp_btf(&mut ebpf, "syscalls.bpf.o", prog, tp, btf)?;
            attached.push(prog);
        }
        Ok(SyscallsBpf { ebpf, attached })
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

impl ReportSource<Syscalls> for SyscallsBpf {
    fn tier(&self) -> Tier {
        Tier::Bpf
    }

    fn watch(&mut self, tgid: u32, _comm: &str) -> anyhow::Result<()> {
        crate::sys::bpf::watch(&mut self.ebpf, tgid)
    }

    fn poll(&mut self, timeout: Duration) -> anyhow::Result<()> {
        std::thread::sleep(timeout);
        Ok(())
    }

    fn finish(mut self: Box<Self>, report: &mut Syscalls) -> anyhow::Result<()> {
        self.stop()?;
        let now = crate::sys::monotonic_ns();
        let stats: PerCpuArray<_, Stat> =
            PerCpuArray::try_from(self.ebpf.map("stats").context("no stats map")?)?;
        let mut sums = vec![Stat::default(); MAX_NR as usize];
        for (nr, sum) in sums.iter_mut().enumerate() {
            for s in stats
                .get(&(nr as u32), 0)
                .context("reading the call counts")?
                .iter()
            {
                sum.calls += s.calls;
                sum.returned += s.returned;
                sum.errors += s.errors;
                sum.total_ns += s.total_ns;
                sum.max_ns = sum.max_ns.max(s.max_ns);
            }
        }
        // Calls still going on: timed up to the end, as strace -c would not.
        let inflight: BpfHashMap<_, u32, InFlight> =
            BpfHashMap::try_from(self.ebpf.map("inflight").context("no inflight map")?)?;
        let mut in_progress = vec![0u64; MAX_NR as usize];
        for entry in inflight.iter() {
            let (_, c) = entry.context("reading the calls in progress")?;
            let (Some(sum), Some(n)) = (
                sums.get_mut(c.nr as usize),
                in_progress.get_mut(c.nr as usize),
            ) else {
                continue;
            };
            let ns = now.saturating_sub(c.since_ns);
            sum.returned += 1;
            sum.total_ns += ns;
            sum.max_ns = sum.max_ns.max(ns);
            *n += 1;
        }
        for (nr, s) in sums.iter().enumerate().filter(|(_, s)| s.calls > 0) {
            report.calls.push(crate::model::syscalls::Call {
                errors: Some(s.errors),
                total_ns: Some(s.total_ns),
                timed: Some(s.returned),
                max_ns: Some(s.max_ns),
                in_progress: Some(in_progress[nr]),
                ..super::call(nr as i64, s.calls)
            });
        }
        report.counts = "calls".into();
        report.other = crate::sys::bpf::counter(&self.ebpf, C_OTHER)?;
        report.untimed = crate::sys::bpf::counter(&self.ebpf, C_INFLIGHT_FULL)?;
        report.collection = "BPF, tp_btf/sys_enter and sys_exit: every call, counted and timed \
                             in the kernel by number"
            .into();
        report
            .notes
            .push("calls begun before tracing started are not counted".into());
        Ok(())
    }
}
