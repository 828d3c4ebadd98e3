//! `kdiag profile`'s stages: samples recorded through `sys::perf`, user
//! stacks unwound (`unwind`, over the binaries' tables in `modules`), then
//! frames named (`symbolize`: kernel frames from kallsyms, user frames by
//! (file, offset) through blazesym; JIT code through `perf_map`).

pub mod modules;
mod names;
pub mod perf_map;
pub mod symbolize;
pub mod unwind;
