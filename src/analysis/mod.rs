//! Pure functions over model data: classification, folding, pattern
//! detection, rules. Unit-tested on fixtures without privileges.

pub mod calendar;
pub mod carriers;
pub mod classify;
pub mod drill;
pub mod elf_rules;
pub mod exec_failure;
pub mod fold;
pub mod io_filter;
pub mod io_pattern;
pub mod kthread;
pub mod limits;
pub mod locks;
pub mod memory_trend;
pub mod offcpu;
pub mod ps;
pub mod runs_as;
pub mod runtimes;
pub mod stalls;
pub mod top;
pub mod trend;
pub mod tsa;
pub mod waits;
pub mod wall;
pub mod watch;
pub mod why;
