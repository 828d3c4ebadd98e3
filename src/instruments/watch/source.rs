//! What a watch scan reads of each process, whatever the tier: the BPF
//! task iterator (`bpf.rs`) or /proc's text files (`proc.rs`).

use crate::instruments::Tier;
use crate::sys::procfs::task::TaskReader;

/// One process's counters at a scan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    pub pid: i32,
    /// Its start, in clock ticks since boot (/proc/PID/stat's): with the
    /// pid, which process this is.
    pub start_ticks: u64,
    pub comm: String,
    /// CPU time of its threads, those that ended included.
    pub cpu_ns: u64,
    /// Run-queue wait: every live thread's on the BPF tier, the main
    /// thread's on /proc (which has no per-process schedstat).
    pub run_delay_ns: u64,
    pub major_faults: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub threads: u32,
}

/// A tier of watch's collector.
pub trait CounterSource {
    fn tier(&self) -> Tier;
    /// The counters of `pids` (None: every process on the machine) into
    /// `out`, cleared first; a process that ended meanwhile is left out.
    /// `reader` is the watcher's own, for the /proc tier.
    fn read(
        &mut self,
        pids: Option<&[i32]>,
        reader: &mut TaskReader,
        out: &mut Vec<Counters>,
    ) -> anyhow::Result<()>;
}
