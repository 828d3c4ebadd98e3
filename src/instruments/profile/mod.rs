//! `kdiag profile`'s stages after recording a sample: unwind user stacks
//! (`unwind`, over the binaries' tables in `modules`), then name frames,
//! JIT code included (`perf_map`).

pub mod modules;
pub mod perf_map;
pub mod unwind;
