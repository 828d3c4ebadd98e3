//! watch's /proc tier: per process, its stat, io and main thread's
//! schedstat, as text the kernel formats at each read.

use super::source::{CounterSource, Counters};
use crate::instruments::Tier;
use crate::sys::procfs::{self, task::TaskReader};

pub struct ProcCounters {
    ns_per_tick: u64,
}

impl ProcCounters {
    pub fn new() -> ProcCounters {
        ProcCounters {
            ns_per_tick: 1_000_000_000 / procfs::hz(),
        }
    }
}

impl CounterSource for ProcCounters {
    fn tier(&self) -> Tier {
        Tier::Procfs
    }

    fn read(
        &mut self,
        pids: Option<&[i32]>,
        reader: &mut TaskReader,
        out: &mut Vec<Counters>,
    ) -> anyhow::Result<()> {
        let all;
        let pids = match pids {
            Some(p) => p,
            None => {
                all = procfs::pids()?;
                &all
            }
        };
        out.clear();
        for &pid in pids {
            let Some(st) = reader.stat_once(pid) else {
                continue; // gone, or a kernel-side race
            };
            let io = reader.io(pid).unwrap_or_default();
            out.push(Counters {
                pid,
                start_ticks: st.start_ticks,
                comm: st.comm,
                cpu_ns: (st.utime + st.stime) * self.ns_per_tick,
                run_delay_ns: reader.schedstat(pid, pid).map_or(0, |s| s.1),
                major_faults: st.majflt,
                read_bytes: io.read_bytes,
                write_bytes: io.write_bytes,
                threads: st.num_threads,
            });
        }
        Ok(())
    }
}
