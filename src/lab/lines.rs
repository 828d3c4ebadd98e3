//! The learner's lines in a plain-mode lab: standard input read on a
//! thread of its own, so a signal ends the wait for one. Ctrl-C leaves the
//! lab as `quit` does (its exit code says whether every step is done);
//! SIGTERM and SIGHUP interrupt it (128+N).

use std::io;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use crate::sys::process::interrupt::Interrupt;

pub struct Lines {
    interrupt: Interrupt,
    rx: mpsc::Receiver<io::Result<String>>,
}

impl Lines {
    /// Catch the signals, then read standard input.
    pub fn catch() -> io::Result<Lines> {
        let interrupt = Interrupt::catch()?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in io::stdin().lines() {
                let failed = line.is_err();
                if tx.send(line).is_err() || failed {
                    break;
                }
            }
        });
        Ok(Lines { interrupt, rx })
    }

    /// The next line; None at the end of input or once a signal came.
    pub fn next(&self) -> io::Result<Option<String>> {
        loop {
            if self.interrupt.is_set() {
                return Ok(None);
            }
            match self.rx.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => return line.map(Some),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(None),
            }
        }
    }

    /// The error the lab ends with when a signal other than Ctrl-C stopped
    /// it (its context names the signal); the answers stay in `dir`.
    pub fn interrupted(&self, dir: &Path) -> Option<anyhow::Error> {
        let err = anyhow::anyhow!(
            "the lab stopped before its end; your answers and progress stay in {}",
            dir.display()
        );
        self.interrupt
            .signal()
            .filter(|&sig| sig != libc::SIGINT)
            .map(|_| self.interrupt.explain(err, true))
    }
}
