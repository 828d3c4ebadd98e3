//! The signals that interrupt kdiag (SIGINT, SIGTERM, SIGHUP), caught so it
//! can stop what it started, release tracing state and say how it ended:
//! exit code 128+N, except Ctrl-C ending a run whose documented end is
//! Ctrl-C (a trace without a duration), which ends normally.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// Which interrupting signal arrived, if any.
#[derive(Debug, Clone)]
pub struct Interrupt {
    signal: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Interrupt {
    /// Catch SIGINT, SIGTERM and SIGHUP from now on.
    pub fn catch() -> io::Result<Interrupt> {
        Interrupt::catch_only(&[SIGINT, SIGTERM, SIGHUP])
    }

    /// Catch these of the interrupting signals only (a service that reads
    /// SIGHUP as "reload" leaves it out).
    pub fn catch_only(signals: &[i32]) -> io::Result<Interrupt> {
        let i = Interrupt {
            signal: Arc::new(AtomicUsize::new(0)),
            stop: Arc::new(AtomicBool::new(false)),
        };
        for &sig in signals {
            signal_hook::flag::register_usize(sig, Arc::clone(&i.signal), sig as usize)?;
            signal_hook::flag::register(sig, Arc::clone(&i.stop))?;
        }
        Ok(i)
    }

    /// A flag that turns true when a signal arrives (for loops that take
    /// an `AtomicBool`).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// Act as if `sig` had arrived: Ctrl-C read as a key by a terminal in
    /// raw mode, where it raises no SIGINT.
    pub fn set(&self, sig: i32) {
        self.signal.store(sig as usize, Ordering::Relaxed);
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether a signal has arrived.
    pub fn is_set(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The last signal that arrived.
    pub fn signal(&self) -> Option<i32> {
        match self.signal.load(Ordering::Relaxed) {
            0 => None,
            s => Some(s as i32),
        }
    }

    /// `err`, marked as the interruption's consequence when a signal
    /// interrupted the run (so kdiag exits 128+N, see `exit_code`).
    pub fn explain(&self, err: anyhow::Error, ctrl_c_ends: bool) -> anyhow::Error {
        match self.signal() {
            Some(SIGINT) if ctrl_c_ends => err,
            Some(sig) => err.context(crate::error::Interrupted(sig)),
            None => err,
        }
    }

    /// The exit code of a run that would exit with `code`: 128+N when
    /// signal N interrupted it, unless it is SIGINT and `ctrl_c_ends` (the
    /// run's normal end is Ctrl-C).
    pub fn exit_code(&self, code: u8, ctrl_c_ends: bool) -> u8 {
        match self.signal() {
            Some(SIGINT) if ctrl_c_ends => code,
            Some(sig) => crate::error::signal_exit(sig),
            None => code,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_set_the_code() {
        let i = Interrupt::catch().unwrap();
        assert_eq!(i.exit_code(1, false), 1);
        // SAFETY: signalling ourselves; the handler only sets flags.
        unsafe { libc::raise(libc::SIGHUP) };
        assert!(i.is_set());
        assert_eq!(i.signal(), Some(libc::SIGHUP));
        assert_eq!(i.exit_code(0, true), 129);
        unsafe { libc::raise(libc::SIGINT) };
        assert_eq!(i.exit_code(0, true), 0);
        assert_eq!(i.exit_code(0, false), 130);
    }
}
