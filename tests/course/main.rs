//! The course's labs end to end in `--plain` mode: each lab with the
//! reference answers of two seeds (the first played by the unprivileged
//! learner through sudo, every command the steps suggest run as
//! `sudo kdiag`) reaches the full score, and plain mode names no panel or
//! key of the app in a step or a hint; another seed's answers fail the
//! seed-dependent checks; `kdiag check --self-test` passes. 0-demo is
//! played once, by the learner's script with no terminal, through
//! `| tee`. One module per lab; shared driving in course_common.rs.

#[path = "../common/mod.rs"]
mod common;

mod bad_elf;
mod bio;
mod course_common;
mod demo;
mod io;
mod lock;
mod memory;
mod scheduling;
mod trend;
