//! What a BPF tier that records stack ids needs to name them: a perf
//! sideband (task records only: FORK, COMM, MMAP2) drained into a
//! `Recorder`, so the user frames of a process that exits before the end
//! still symbolize, from the mappings it had. offcpu's and faults' BPF
//! tiers share it; each adds its counted stacks to `recorder()` at the end.

use std::collections::HashSet;
use std::time::Duration;

use anyhow::Context;

use super::symbolize::{Half, RecordOptions, Recorder};
use crate::sys::bpf::Captured;
use crate::sys::perf::{EventSpec, Record, Session, Target};

/// Data pages per CPU for the sideband ring: task records are small and
/// rare (a process start is a few dozen).
const SIDEBAND_PAGES: usize = 64;

/// The sideband of a BPF trace and the recorder its records go to.
pub struct Sideband {
    session: Session,
    recorder: Recorder,
    /// Processes whose task records matter (None: every process).
    watched: Option<HashSet<u32>>,
    follow: bool,
}

impl Sideband {
    /// Open and enable the sideband. `tgids` (empty: every process) that
    /// exist now have their mappings and thread names read at once; with
    /// `follow`, the children they start are watched too.
    pub fn open(tgids: &[u32], follow: bool, options: RecordOptions) -> anyhow::Result<Sideband> {
        let session = Session::open(&[EventSpec::sideband()], Target::AllCpus, SIDEBAND_PAGES)
            .context("opening the sideband of process mappings")?;
        session.enable()?;
        let mut recorder = Recorder::new(options);
        for &tgid in tgids {
            recorder.capture(tgid);
            for tid in crate::sys::procfs::tids(tgid as i32) {
                if let Ok(c) = std::fs::read_to_string(format!("/proc/{tgid}/task/{tid}/comm")) {
                    recorder.name(tid as u32, c.trim_end());
                }
            }
        }
        Ok(Sideband {
            session,
            recorder,
            watched: (!tgids.is_empty()).then(|| tgids.iter().copied().collect()),
            follow,
        })
    }

    /// Watch one more process: a `-- CMD` child, held before its exec,
    /// named `comm` until its exec renames it.
    pub fn watch(&mut self, tgid: u32, comm: &str) {
        self.recorder.name(tgid, comm);
        if let Some(w) = &mut self.watched {
            w.insert(tgid);
        }
    }

    /// Wait up to `timeout` for records, and take them.
    pub fn poll(&mut self, timeout: Duration) -> anyhow::Result<()> {
        self.session.poll(timeout)?;
        self.drain();
        Ok(())
    }

    /// Stop and take the records still in the ring.
    pub fn stop(&mut self) -> anyhow::Result<()> {
        self.session.disable()?;
        self.drain();
        Ok(())
    }

    /// The recorder, for the stacks counted in the kernel.
    pub fn recorder(&mut self) -> &mut Recorder {
        &mut self.recorder
    }

    /// The recorder, once the stacks are in: `finish` names their frames.
    pub fn into_recorder(self) -> Recorder {
        self.recorder
    }

    fn drain(&mut self) {
        let (watched, follow, recorder) = (&mut self.watched, self.follow, &mut self.recorder);
        self.session.drain(|rec| {
            let pid = match rec {
                Record::Fork { pid, ppid, .. } => {
                    if let Some(w) = watched.as_mut()
                        && follow
                        && w.contains(&ppid)
                    {
                        w.insert(pid);
                    }
                    pid
                }
                Record::Comm { pid, .. } | Record::Mmap2 { pid, .. } => pid,
                _ => return,
            };
            if watched.as_ref().is_none_or(|w| w.contains(&pid)) {
                recorder.record(&rec);
            }
        });
    }
}

/// A half read from a BPF stack map, as the recorder takes it: a lost or
/// unreadable half is the placeholder frame `lost` (or `[user stack
/// unreadable]`), a kernel thread's absent user half no frames.
pub fn half<'a>(c: &'a Captured, lost: &'static str) -> Half<'a> {
    match c {
        Captured::Ips(ips) => Half::Ips(ips),
        Captured::Absent => Half::Ips(&[]),
        Captured::Lost => Half::Lost(lost),
        Captured::Unreadable => Half::Lost("[user stack unreadable]"),
    }
}
