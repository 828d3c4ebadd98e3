//! Plain data types shared by collectors, analyses and renderers. No I/O.

pub mod block;
pub mod capability;
pub mod class_summary;
pub mod diagnose_run;
pub mod diagnosis;
pub mod drill;
pub mod elf;
pub mod errno;
pub mod exec;
pub mod flame;
pub mod lab;
pub mod limits;
pub mod locks;
pub mod offcpu;
pub mod process;
pub mod profile;
pub mod rusage;
pub mod signal;
pub mod stacks;
pub mod stalls;
pub mod syscalls;
pub mod system;
pub mod trend;
pub mod verdict;
pub mod wall;
pub mod watch;
