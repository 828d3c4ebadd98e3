//! Processes kdiag starts or acts for: spawning commands held before exec
//! (`spawn`, the exec side in `exec`) under a supervisor that kills them with kdiag (`supervisor`),
//! the sudo invoker and acting as them (`privilege`), resource accounting
//! (`rusage`), the signals that interrupt kdiag (`interrupt`), who sent a
//! fatal signal (`signal_origin`), which kdiag owns a thing it left in a
//! shared place (`owner`), files it caused another program to make, gone
//! with kdiag (`janitor`), and the invoker's file-system identity on a
//! thread (`fs_identity`, what `crate::user_files` acts with).

mod exec;
pub mod fs_identity;
pub mod interrupt;
pub mod janitor;
pub mod owner;
pub mod privilege;
pub mod rusage;
pub mod signal_origin;
pub mod spawn;
pub mod supervisor;
