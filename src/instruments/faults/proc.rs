//! The /proc tier of `kdiag faults`: each thread's page faults (minflt +
//! majflt of /proc/PID/task/TID/stat) counted over the window, for
//! machines where BPF cannot attach. It has no code paths: each thread is
//! one stack of one frame, under its process's name.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::instruments::{ReportSource, Tier};
use crate::model::profile::{Frame, Profile, Stack, WeightUnit};
use crate::sys::procfs::{self, task::TaskReader};

/// How often the threads are read: a thread's faults after its last read
/// before it exits are not seen.
const EVERY: Duration = Duration::from_millis(100);

/// A thread's faults as read: at the start (or 0 for a thread born since)
/// and last.
#[derive(Debug, Clone, Default)]
struct Thread {
    comm: String,
    first: u64,
    last: u64,
}

/// The /proc tier at work.
pub struct FaultsProc {
    tgids: Vec<u32>,
    /// By (tgid, tid).
    threads: BTreeMap<(u32, u32), Thread>,
    /// Keeps each thread's stat open between reads.
    reader: TaskReader,
    read_at: Instant,
}

impl FaultsProc {
    /// Read every thread of `tgids` now: the counts the window starts from.
    pub fn start(tgids: &[u32]) -> FaultsProc {
        let mut this = FaultsProc {
            tgids: Vec::new(),
            threads: BTreeMap::new(),
            reader: TaskReader::default(),
            read_at: Instant::now(),
        };
        for &tgid in tgids {
            this.add(tgid);
        }
        this
    }

    /// Watch `tgid` from now on: its threads' counts so far are not counted.
    fn add(&mut self, tgid: u32) {
        self.tgids.push(tgid);
        self.read(tgid, true);
    }

    fn read(&mut self, tgid: u32, baseline: bool) {
        for tid in procfs::tids(tgid as i32) {
            let Some(st) = self.reader.stat(tgid as i32, Some(tid)) else {
                continue;
            };
            let n = st.minflt + st.majflt;
            let t = self.threads.entry((tgid, tid as u32)).or_default();
            if baseline && t.comm.is_empty() {
                t.first = n;
            }
            t.comm = st.comm;
            t.last = n;
        }
    }

    fn read_all(&mut self) {
        for tgid in self.tgids.clone() {
            self.read(tgid, false);
        }
        self.read_at = Instant::now();
    }
}

impl ReportSource<Profile> for FaultsProc {
    fn tier(&self) -> Tier {
        Tier::Procfs
    }

    fn watch(&mut self, tgid: u32, _comm: &str) -> anyhow::Result<()> {
        self.add(tgid);
        Ok(())
    }

    fn poll(&mut self, timeout: Duration) -> anyhow::Result<()> {
        std::thread::sleep(timeout.min(EVERY.saturating_sub(self.read_at.elapsed())));
        if self.read_at.elapsed() >= EVERY {
            self.read_all();
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>, profile: &mut Profile) -> anyhow::Result<()> {
        self.read_all();
        for (&(tgid, tid), t) in &self.threads {
            let n = t.last.saturating_sub(t.first);
            if n == 0 {
                continue;
            }
            // The process's name is its main thread's.
            let process = self
                .threads
                .get(&(tgid, tgid))
                .map_or(t.comm.as_str(), |m| m.comm.as_str());
            profile.stacks.push(Stack {
                comm: process.to_string(),
                frames: vec![Frame::user(format!("{} [{tid}]", t.comm))],
                samples: n,
                weight: n,
                user_depth: 0,
                state: None,
                waker: None,
                ongoing: false,
            });
        }
        profile.samples = profile.total_weight();
        profile.unit = WeightUnit::Events;
        profile.event = super::EVENT.into();
        profile.collection = Some(format!(
            "/proc, each thread's minflt + majflt read every {} ms",
            EVERY.as_millis()
        ));
        profile.notes.push(
            "the /proc tier has no code paths: each thread is one frame, `name [TID]`; \
             children are not followed, and a thread's faults after its last read before it \
             exited are not seen"
                .into(),
        );
        Ok(())
    }
}
