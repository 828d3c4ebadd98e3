//! The kernel interfaces, and nothing else: perf_event_open sessions and
//! rings, BPF loading, tracefs formats, /proc readers, processes (spawning,
//! privilege, rusage, signal origin), block devices, kernel symbols, and the
//! machine facts the ELF rules need. Instruments build on these; nothing
//! here knows about a particular command.

pub mod bpf;
pub mod cgroup;
pub mod disks;
pub mod elf;
pub mod kallsyms;
pub mod perf;
pub mod process;
pub mod procfs;
pub mod tracefs;
