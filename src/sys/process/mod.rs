//! Processes kdiag starts or acts for: spawning commands held before exec
//! (`spawn`, the exec side in `exec`) under a supervisor that kills them with kdiag (`supervisor`),
//! the sudo invoker and acting as them (`privilege`), resource accounting
//! (`rusage`), the signals that interrupt kdiag (`interrupt`), who sent a
//! fatal signal (`signal_origin`), which kdiag owns a thing it left in a
//! shared place (`owner`), files it caused another program to make, gone
//! with kdiag (`janitor`), and the one way to read and write files
//! the user names (`user_files`).

mod exec;
pub mod interrupt;
pub mod janitor;
pub mod owner;
pub mod privilege;
pub mod rusage;
pub mod signal_origin;
pub mod spawn;
pub mod supervisor;
pub mod user_files;
