//! Exec tracing in a thread of its own for the length of a watch
//! (diagnose): an exec that fails is over in a millisecond, so it is
//! traced from before the command is released (or the watch begins) to
//! the end, not after a verdict.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Filter, Spawned};
use crate::analysis::exec_failure::FileFacts;
use crate::instruments::Tier;
use crate::model::exec::TraceEvent;

/// Events kept: the latest (a build runs thousands of programs).
const KEEP: usize = 10_000;

/// A running exec trace; dropping it stops the thread.
pub struct ExecWatch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<anyhow::Result<Trace>>>,
}

/// What it saw.
pub struct Trace {
    pub events: Vec<TraceEvent>,
    /// What elf-check found in the files of the failed execs, looked at
    /// when the failure was seen (a crash-looping service's file may be
    /// gone by the end).
    pub files: Vec<FileFacts>,
    pub tier: Tier,
    pub lost: u64,
}

/// Start tracing the execs `filter` names; returns once tracing is on.
pub fn watch(filter: Filter, spawned: Option<Spawned>) -> anyhow::Result<ExecWatch> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let (ready, started) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("exec-watch".into())
        .spawn(move || {
            let mut source = match super::open(crate::instruments::Ask::Auto, filter, spawned) {
                Ok((s, _)) => {
                    let _ = ready.send(None);
                    s
                }
                Err(e) => {
                    let _ = ready.send(Some(e));
                    anyhow::bail!("exec tracing did not start");
                }
            };
            let mut events = Vec::new();
            let mut files: Vec<FileFacts> = Vec::new();
            loop {
                let last = flag.load(Ordering::Relaxed);
                let seen = events.len();
                // After the end, one more poll for the records in flight.
                source.poll(Duration::from_millis(100), &mut events)?;
                let failed: Vec<TraceEvent> = events[seen..]
                    .iter()
                    .filter(|e| match e {
                        TraceEvent::Exec(x) => {
                            x.ret < 0 && !files.iter().any(|f| Some(&f.path) == x.filename.as_ref())
                        }
                        _ => false,
                    })
                    .cloned()
                    .collect();
                files.extend(super::file_facts(&failed));
                if events.len() > 2 * KEEP {
                    events.drain(..events.len() - KEEP);
                }
                if last {
                    break;
                }
            }
            source.finish(&mut events)?;
            Ok(Trace {
                events,
                files,
                tier: source.tier(),
                lost: source.lost(),
            })
        })?;
    match started.recv() {
        Ok(None) => Ok(ExecWatch {
            stop,
            thread: Some(thread),
        }),
        Ok(Some(e)) => Err(e),
        Err(_) => Err(anyhow::anyhow!("the exec trace thread ended at its start")),
    }
}

impl ExecWatch {
    /// Stop tracing and take what it saw.
    pub fn finish(mut self) -> anyhow::Result<Trace> {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.take().expect("finished once");
        thread
            .join()
            .map_err(|_| anyhow::anyhow!("the exec trace thread panicked"))?
    }
}

impl Drop for ExecWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
