//! Processes kdiag starts or acts for: spawning commands held before exec
//! (`spawn`), the sudo invoker and acting as them (`privilege`), resource
//! accounting (`rusage`), who sent a fatal signal (`signal_origin`), and
//! the one way to read and write files the user names (`user_files`).

pub mod privilege;
pub mod rusage;
pub mod signal_origin;
pub mod spawn;
pub mod user_files;
