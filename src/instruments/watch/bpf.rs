//! watch's BPF tier: every task's counters from the kernel's task iterator
//! (`sys::bpf::tasks`), one binary record per thread, summed per process
//! here. Nothing is formatted as text and no file is opened per process.

use std::collections::HashSet;

use super::source::{CounterSource, Counters};
use crate::instruments::Tier;
use crate::sys::bpf::tasks::{Task, Tasks};
use crate::sys::procfs::{self, task::TaskReader};

pub struct IterCounters {
    tasks: Tasks,
    records: Vec<Task>,
    ns_per_tick: u64,
}

impl IterCounters {
    pub fn open() -> anyhow::Result<IterCounters> {
        Ok(IterCounters {
            tasks: Tasks::open()?,
            records: Vec::new(),
            ns_per_tick: 1_000_000_000 / procfs::hz(),
        })
    }
}

impl CounterSource for IterCounters {
    fn tier(&self) -> Tier {
        Tier::Bpf
    }

    fn read(
        &mut self,
        pids: Option<&[i32]>,
        _reader: &mut TaskReader,
        out: &mut Vec<Counters>,
    ) -> anyhow::Result<()> {
        self.tasks.read(&mut self.records)?;
        let wanted: Option<HashSet<u32>> = pids.map(|p| p.iter().map(|&p| p as u32).collect());
        let wanted = |t: &Task| wanted.as_ref().is_none_or(|w| w.contains(&t.tgid));
        // The leaders first: the iterator walks tids in ascending order, so
        // `out` is sorted by pid and a thread finds its process by binary
        // search, with no hashing per task. The entries (and their names'
        // buffers) are reused from the last scan: no allocation per process.
        let mut n = 0;
        for t in self.records.iter().filter(|t| t.tid == t.tgid && wanted(t)) {
            if n == out.len() {
                out.push(Counters::default());
            }
            let c = &mut out[n];
            n += 1;
            c.comm.clear();
            c.comm.push_str(&String::from_utf8_lossy(t.comm()));
            *c = Counters {
                pid: t.tgid as i32,
                // As /proc/PID/stat rounds it (nsec_to_clock_t).
                start_ticks: t.start_boottime / self.ns_per_tick,
                comm: std::mem::take(&mut c.comm),
                cpu_ns: t.sum_exec_runtime,
                run_delay_ns: t.run_delay,
                major_faults: t.maj_flt,
                read_bytes: t.read_bytes,
                write_bytes: t.write_bytes,
                threads: 1,
            };
        }
        out.truncate(n);
        // Outside the init PID namespace the walk's order is not the pids'.
        if !out.is_sorted_by_key(|c| c.pid) {
            out.sort_unstable_by_key(|c| c.pid);
        }
        // Then the other threads; one whose leader the walk missed (it
        // ended between the two) is left out with its process.
        for t in self.records.iter().filter(|t| t.tid != t.tgid) {
            let Ok(i) = out.binary_search_by_key(&(t.tgid as i32), |c| c.pid) else {
                continue;
            };
            let c = &mut out[i];
            c.cpu_ns += t.sum_exec_runtime;
            c.run_delay_ns += t.run_delay;
            c.major_faults += t.maj_flt;
            c.read_bytes += t.read_bytes;
            c.write_bytes += t.write_bytes;
            c.threads += 1;
        }
        Ok(())
    }
}
