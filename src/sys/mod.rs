//! The only layer that talks to the kernel: procfs, tracefs, perf_event_open,
//! BPF loaders, wait4/rusage, symbolization. Returns `model` types.

pub mod block_perf;
pub mod bpf;
pub mod disks;
pub mod perf;
pub mod privilege;
pub mod tracefs;
