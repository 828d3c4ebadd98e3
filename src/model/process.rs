//! One process (or thread) as read from /proc, with the raw kernel values:
//! conversions to percentages and rates live in `analysis`.

use serde::{Deserialize, Serialize};

/// A process (or, with threads, one task of it) at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Process {
    /// Thread-group id (the PID users know).
    pub pid: i32,
    /// Task id: equal to `pid` for a process, the thread's id for a thread.
    pub tid: i32,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
    /// Foreground process group of the controlling terminal, -1 without one.
    pub tpgid: i32,
    /// Controlling terminal as the kernel encodes it (0 = none).
    pub tty_nr: u32,
    /// Terminal name as ps prints it ("pts/0", "?" for none).
    pub tty: String,
    /// Effective user id (ps's USER).
    pub uid: u32,
    /// Real user id: whose process it is (a learner observes their own).
    #[serde(default)]
    pub real_uid: u32,
    pub user: String,
    /// Short name (/proc/PID/comm, at most 15 bytes).
    pub comm: String,
    /// Arguments; empty for kernel threads and zombies.
    pub cmdline: Vec<String>,
    /// State letter: R S D Z T t X I P.
    pub state: char,
    /// Kernel task flags (PF_*).
    pub flags: u32,
    pub nice: i32,
    pub num_threads: u32,
    /// User and system CPU time in clock ticks.
    pub utime: u64,
    pub stime: u64,
    /// Start time in clock ticks after boot.
    pub start_ticks: u64,
    /// Virtual size and resident set in KiB.
    pub vsz_kib: u64,
    pub rss_kib: u64,
    /// Locked memory in KiB (VmLck), shown as the L modifier.
    pub locked_kib: u64,
    pub voluntary_ctxt: u64,
    pub nonvoluntary_ctxt: u64,
    /// Threads in uninterruptible sleep (D) and running (R), counted over
    /// every thread when top's extras are read (a process's own stat file
    /// has its main thread's state only); 0 otherwise.
    pub threads_d: u32,
    pub threads_r: u32,
    /// Storage I/O from /proc/PID/io; `None` when it was not read or not permitted.
    pub io: Option<Io>,
}

/// Bytes a process really caused to be read from or written to storage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Io {
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// /proc/PID/smaps_rollup: the process's memory summed over its mappings,
/// in KiB. PSS divides each shared page among the processes mapping it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmapsRollup {
    pub rss_kib: u64,
    pub pss_kib: u64,
    pub pss_anon_kib: u64,
    pub pss_file_kib: u64,
    pub pss_shmem_kib: u64,
    /// Pages also mapped by other processes, and those only this one maps.
    pub shared_kib: u64,
    pub private_kib: u64,
    pub anonymous_kib: u64,
    pub swap_kib: u64,
}

impl SmapsRollup {
    /// The sum of two processes' figures.
    pub fn plus(&self, o: &SmapsRollup) -> SmapsRollup {
        SmapsRollup {
            rss_kib: self.rss_kib + o.rss_kib,
            pss_kib: self.pss_kib + o.pss_kib,
            pss_anon_kib: self.pss_anon_kib + o.pss_anon_kib,
            pss_file_kib: self.pss_file_kib + o.pss_file_kib,
            pss_shmem_kib: self.pss_shmem_kib + o.pss_shmem_kib,
            shared_kib: self.shared_kib + o.shared_kib,
            private_kib: self.private_kib + o.private_kib,
            anonymous_kib: self.anonymous_kib + o.anonymous_kib,
            swap_kib: self.swap_kib + o.swap_kib,
        }
    }
}

/// What top's detail panel shows for the selected process, read on demand.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Details {
    pub pid: i32,
    /// (tid, name, state) of every thread.
    pub threads: Vec<(i32, String, char)>,
    /// Kernel function the task sleeps in ("0" or empty when running).
    pub wchan: Option<String>,
    /// /proc/PID/schedstat: time on CPU and waiting on a run queue (ns), timeslices.
    pub on_cpu_ns: Option<u64>,
    pub run_wait_ns: Option<u64>,
    pub timeslices: Option<u64>,
    /// Open file descriptors; `None` when not permitted.
    pub open_fds: Option<usize>,
    pub cgroup: Option<String>,
}
