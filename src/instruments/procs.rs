//! /proc for ps, top and the lab app's live panels, which must not read
//! the kernel themselves: every process (top's columns) or those asked for,
//! the machine's totals and clock, and one process's threads (their states
//! and wait channels), details and fault counters.

use std::io;

use crate::analysis::ps::Context;
use crate::model::process::{Details, Process};
use crate::model::system::System;
use crate::sys::procfs::{self, parse};

/// Reads the process table again and again (names cached between reads).
pub struct Table {
    reader: procfs::Reader,
}

impl Default for Table {
    fn default() -> Self {
        Table::new(true)
    }
}

impl Table {
    /// `thread_states`: each process row carries its threads' states (the
    /// S column), which a table of threads need not.
    pub fn new(thread_states: bool) -> Table {
        let mut reader = procfs::Reader::new();
        reader.top_extras = thread_states;
        Table { reader }
    }

    /// Every process now.
    pub fn processes(&mut self) -> io::Result<Vec<Process>> {
        self.reader.all(false)
    }

    /// Every process now, or only those of `pids` (in PID order, each once,
    /// as ps lists them), a row per thread with `threads`; and the PIDs
    /// asked for that matched none.
    pub fn read(&mut self, pids: &[i32], threads: bool) -> io::Result<(Vec<Process>, Vec<i32>)> {
        if pids.is_empty() {
            return Ok((self.reader.all(threads)?, Vec::new()));
        }
        let mut pids = pids.to_vec();
        pids.sort_unstable();
        pids.dedup();
        let (mut procs, mut missing) = (Vec::new(), Vec::new());
        for pid in pids {
            let found = match threads {
                true => self.reader.threads(pid),
                false => self.reader.process(pid).into_iter().collect(),
            };
            if found.is_empty() {
                missing.push(pid);
            }
            procs.extend(found);
        }
        Ok((procs, missing))
    }
}

/// What ps's columns are computed against: the machine's uptime, clock
/// rate, memory and boot time, and the time and time zone now.
pub fn ps_context() -> io::Result<Context> {
    let system = procfs::system()?;
    let (now, utc_offset) = procfs::clock();
    Ok(Context {
        uptime_secs: system.uptime_secs,
        hz: system.hz,
        mem_total_kib: system.memory.total_kib,
        boot_time: system.boot_time,
        now,
        utc_offset,
    })
}

/// One process's details for top's panel (its threads, limits, files).
pub fn details(pid: i32) -> Details {
    procfs::details(pid)
}

/// Uptime, load, CPU split and memory of the machine.
pub fn system() -> io::Result<System> {
    procfs::system()
}

/// Each thread of `pid` now: its state letter and, asleep (S or D), the
/// kernel function it waits in, if /proc names one.
pub fn thread_states(pid: i32) -> Vec<(char, Option<String>)> {
    let mut out = Vec::new();
    for tid in procfs::tids(pid) {
        let dir = format!("/proc/{pid}/task/{tid}");
        let Some(st) = std::fs::read(format!("{dir}/stat"))
            .ok()
            .and_then(|b| parse::stat(&b))
        else {
            continue;
        };
        let wchan = matches!(st.state, 'S' | 'D')
            .then(|| std::fs::read_to_string(format!("{dir}/wchan")).unwrap_or_default())
            .filter(|w| !w.is_empty() && w != "0");
        out.push((st.state, wchan));
    }
    out
}

/// Minor and major page faults of `pid` so far ((0, 0) once it has gone).
pub fn faults(pid: i32) -> (u64, u64) {
    std::fs::read(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|b| parse::stat(&b))
        .map_or((0, 0), |s| (s.minflt, s.majflt))
}
