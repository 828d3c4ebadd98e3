//! The /proc tier of `kdiag syscalls`: each thread's
//! /proc/PID/task/TID/syscall read every few ms, for machines where BPF
//! cannot attach. The file names a call only while the thread is blocked
//! in it, so a call is counted in samples that saw a thread in it: calls
//! that never block are not seen, and nothing is timed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::instruments::{ReportSource, Tier};
use crate::model::syscalls::Syscalls;
use crate::sys::procfs::{self, parse::Syscall, task::TaskReader};

/// How often each thread is sampled.
const EVERY: Duration = Duration::from_millis(5);
/// How often the threads are listed again.
const LIST_EVERY: Duration = Duration::from_millis(100);

/// The /proc tier at work.
pub struct SyscallsProc {
    tgids: Vec<u32>,
    /// (tgid, tid) of every thread, as last listed.
    threads: Vec<(i32, i32)>,
    listed_at: Instant,
    /// Keeps each thread's syscall file open between reads.
    reader: TaskReader,
    /// Samples by call number.
    seen: BTreeMap<i64, u64>,
    /// Samples of threads running, or blocked outside any call.
    other: u64,
    sampled_at: Instant,
}

impl SyscallsProc {
    pub fn start(tgids: &[u32]) -> SyscallsProc {
        let mut this = SyscallsProc {
            tgids: tgids.to_vec(),
            threads: Vec::new(),
            listed_at: Instant::now(),
            reader: TaskReader::default(),
            seen: BTreeMap::new(),
            other: 0,
            sampled_at: Instant::now(),
        };
        this.list();
        this
    }

    fn list(&mut self) {
        self.threads = (self.tgids.iter())
            .flat_map(|&p| {
                procfs::tids(p as i32)
                    .into_iter()
                    .map(move |t| (p as i32, t))
            })
            .collect();
        self.listed_at = Instant::now();
    }

    fn sample(&mut self) {
        if self.listed_at.elapsed() >= LIST_EVERY {
            self.list();
        }
        for &(pid, tid) in &self.threads {
            match self.reader.syscall(pid, tid) {
                Some(Syscall::In { nr, .. }) => *self.seen.entry(nr).or_default() += 1,
                Some(_) => self.other += 1,
                // Gone, or not ours to read.
                None => {}
            }
        }
        self.sampled_at = Instant::now();
    }
}

impl ReportSource<Syscalls> for SyscallsProc {
    fn tier(&self) -> Tier {
        Tier::Procfs
    }

    fn watch(&mut self, tgid: u32, _comm: &str) -> anyhow::Result<()> {
        self.tgids.push(tgid);
        self.list();
        Ok(())
    }

    fn poll(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let end = Instant::now() + timeout;
        loop {
            if self.sampled_at.elapsed() >= EVERY {
                self.sample();
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            std::thread::sleep(left.min(EVERY.saturating_sub(self.sampled_at.elapsed())));
        }
    }

    fn finish(self: Box<Self>, report: &mut Syscalls) -> anyhow::Result<()> {
        report
            .calls
            .extend(self.seen.iter().map(|(&nr, &n)| super::call(nr, n)));
        report.counts = "samples".into();
        report.other = self.other;
        report.collection = format!(
            "/proc, each thread's syscall file read every {} ms",
            EVERY.as_millis()
        );
        report.notes.push(
            "the /proc tier sees a call only while a thread is blocked in it: counts are \
             samples, not calls; calls that never block are missed; there are no latencies; \
             children are not followed"
                .into(),
        );
        Ok(())
    }
}
