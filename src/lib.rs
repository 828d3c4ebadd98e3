//! kdiag: guided labs and automated diagnosis for misbehaving Linux processes.
//!
//! Data flows one way: `sys` (collect) → `model` (plain data) → `analysis`
//! (pure functions) → `render` / `tui`. `commands` wires them per subcommand;
//! `main.rs` only parses the command line and maps errors to exit codes.
//! A library as well as a binary so integration tests and benchmarks can
//! reach the pieces directly.

pub mod analysis;
pub mod cli;
pub mod commands;
pub mod course;
pub mod diagnose;
pub mod error;
pub mod export;
pub mod grade;
pub mod instruments;
pub mod lab;
pub mod model;
pub mod render;
pub mod service;
pub mod sys;
pub mod tui;
pub mod user_files;
pub mod workloads;

#[cfg(test)]
pub(crate) mod testing;
