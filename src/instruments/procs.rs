//! /proc for the lab app's live panels, which must not read the kernel
//! themselves: every process (top's columns) and the machine's totals,
//! and one process's threads (their states and wait channels) and fault
//! counters.

use std::io;

use crate::model::process::Process;
use crate::model::system::System;
use crate::sys::procfs::{self, parse};

/// Reads the process table again and again (names cached between reads).
pub struct Table {
    reader: procfs::Reader,
}

impl Default for Table {
    fn default() -> Self {
        let mut reader = procfs::Reader::new();
        reader.top_extras = true;
        Table { reader }
    }
}

impl Table {
    /// Every process now.
    pub fn processes(&mut self) -> io::Result<Vec<Process>> {
        self.reader.all(false)
    }
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
