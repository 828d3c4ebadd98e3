//! The kernel interfaces, and nothing else: perf_event_open sessions and
//! rings, BPF loading, tracefs formats, /proc readers, processes (spawning,
//! privilege, rusage, signal origin), block devices, kernel symbols, and the
//! machine facts the ELF rules need. Instruments build on these; nothing
//! here knows about a particular command.

pub mod bpf;
pub mod cgroup;
pub mod cgroupfs;
pub mod disks;
pub mod kallsyms;
pub mod peer;
pub mod perf;
pub mod process;
pub mod procfs;
pub mod sock_diag;
pub mod tracefs;

/// The size of a memory page (4096 if sysconf cannot tell): perf rings, BPF
/// ring buffers and /proc's page counts are in pages.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page)
        .ok()
        .filter(|p| p.is_power_of_two())
        .unwrap_or(4096)
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of perf records (kdiag sets
/// use_clockid), of bpf_ktime_get_ns, and of the supervisor's reports.
/// Async-signal-safe (the supervisor calls it between fork and exit).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec for clock_gettime to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
