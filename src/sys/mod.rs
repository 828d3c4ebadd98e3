//! The only layer that talks to the kernel: procfs, tracefs, perf_event_open,
//! BPF loaders, wait4/rusage, symbolization. Returns `model` types.

pub mod block_perf;
pub mod bpf;
pub mod disks;
pub mod elf;
pub mod exec;
pub mod exec_perf;
pub mod perf;
pub mod privilege;
pub mod probe;
pub mod proc;
pub mod rusage;
pub mod signal_origin;
pub mod spawn;
pub mod symbolize;
pub mod tracefs;
pub mod workloads;
