//! watch's BPF tier: every task's counters from the kernel's task iterator
//! (`sys::bpf::tasks`), one binary record per thread, summed per process
//! here. Nothing is formatted as text and no file is opened per process.

use std::collections::{HashMap, HashSet};

use super::source::{CounterSource, Counters};
use crate::instruments::Tier;
use crate::sys::bpf::tasks::{Task, Tasks};
use crate::sys::procfs::{self, task::TaskReader};

pub struct IterCounters {
    tasks: Tasks,
    records: Vec<Task>,
    /// Where each tgid is in the output (kept for its capacity).
    at: HashMap<u32, usize>,
    ns_per_tick: u64,
}

impl IterCounters {
    pub fn open() -> anyhow::Result<IterCounters> {
        Ok(IterCounters {
            tasks: Tasks::open()?,
            records: Vec::new(),
            at: HashMap::new(),
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
        out.clear();
        self.at.clear();
        for t in &self.records {
            if wanted.as_ref().is_some_and(|w| !w.contains(&t.tgid)) {
                continue;
            }
            let i = *self.at.entry(t.tgid).or_insert_with(|| {
                out.push(Counters {
                    pid: t.tgid as i32,
                    ..Counters::default()
                });
                out.len() - 1
            });
            let c = &mut out[i];
            c.cpu_ns += t.sum_exec_runtime;
            c.run_delay_ns += t.run_delay;
            c.major_faults += t.maj_flt;
            c.read_bytes += t.read_bytes;
            c.write_bytes += t.write_bytes;
            c.threads += 1;
            if t.tid == t.tgid {
                // As /proc/PID/stat rounds it (nsec_to_clock_t).
                c.start_ticks = t.start_boottime / self.ns_per_tick;
                c.comm = String::from_utf8_lossy(t.comm()).into_owned();
            }
        }
        // Threads whose leader the walk missed (it ended between the two).
        out.retain(|c| !c.comm.is_empty());
        Ok(())
    }
}
