//! Processes kdiag starts or acts for: spawning commands held before exec
//! (`spawn`), the sudo invoker and acting as them (`privilege`), resource
//! accounting (`rusage`) and who sent a fatal signal (`signal_origin`).

pub mod privilege;
pub mod rusage;
pub mod signal_origin;
pub mod spawn;
