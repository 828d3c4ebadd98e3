//! `kdiag time`'s measurement: a command run to its end under the
//! supervisor (its rusage, the bytes it moved to and from storage, how it
//! ended) and, as root, who sent the signal that killed it (tracefs's
//! signal_generate); without root, the note that says why not.

use std::ffi::OsString;

use crate::model::rusage::CommandRun;
pub use crate::sys::process::rusage::RunError;
use crate::sys::process::signal_origin::SignalTracer;

/// Run `argv` to its end. The note is for a fatal signal whose sender is
/// unknown: why it is.
pub fn run(argv: &[OsString]) -> Result<(CommandRun, Option<String>), RunError> {
    let (tracer, origin_note) = if crate::sys::process::privilege::is_root() {
        match SignalTracer::start() {
            Ok(t) => (Some(t), None),
            Err(e) => (None, Some(format!("tracing signal_generate failed: {e}"))),
        }
    } else {
        (None, Some("run with sudo to trace who sent it".to_string()))
    };
    let run = crate::sys::process::rusage::run_command(argv, tracer.as_ref())?;
    drop(tracer);
    let note = match &run.ending {
        crate::model::rusage::Ending::Signaled { origin: None, .. } => {
            origin_note.or_else(|| Some("signal_generate event not recorded".to_string()))
        }
        _ => None,
    };
    Ok((run, note))
}
