//! Whole-machine counters: CPU time split, load, memory, uptime.

use serde::Serialize;

/// Cumulative CPU time of all CPUs in clock ticks (first line of /proc/stat).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Memory {
    pub total_kib: u64,
    pub free_kib: u64,
    pub available_kib: u64,
    pub buffers_kib: u64,
    pub cached_kib: u64,
    pub swap_total_kib: u64,
    pub swap_free_kib: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct System {
    pub uptime_secs: f64,
    pub load: [f64; 3],
    pub cpu: CpuTimes,
    pub memory: Memory,
    /// Boot time, seconds since the epoch (btime in /proc/stat).
    pub boot_time: u64,
    /// Clock ticks per second (USER_HZ).
    pub hz: u64,
}
