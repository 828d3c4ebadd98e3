//! CPU profiles: samples recorded through `sys::perf`, then symbolized
//! (`symbolize.rs`: kernel frames from kallsyms, user frames by (file,
//! offset) through blazesym).

pub mod symbolize;
