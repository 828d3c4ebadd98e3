//! The perf tier's pairing of tracepoint hits into requests: perf records
//! carry no request pointer, so hits are matched by (dev, sector) and
//! (dev, sector, nr_sector), and who submitted a request by the (disk,
//! sector) of its first bio (see perf.rs for which tracepoint says what).

use std::collections::{HashMap, VecDeque};

use crate::model::block::{BlockIo, DevId, Task};

/// Records younger than this stay buffered, so records of other CPUs that
/// happened earlier but were not yet drained are matched in time order.
pub const REORDER_NS: u64 = 50_000_000;
/// Unmatched starts or issues older than this are forgotten (merged away,
/// or their completion was lost).
const STALE_NS: u64 = 30_000_000_000;
/// At most about this many starts, inserts and issues are kept waiting for
/// their match. Under a storm with lost records, unmatched ones pile up
/// faster than they go stale: past this, older ones are forgotten sooner
/// (after `SHORT_STALE_NS`, then `REORDER_NS`), so memory stays bounded.
const MAX_TRACKED: usize = 1 << 16;
const SHORT_STALE_NS: u64 = 1_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Start,
    Insert,
    Issue,
    Complete,
    /// block_bio_queue: a bio entering the block layer.
    Queue,
    /// iomap_iter: a step of a file's I/O at file byte `pos`.
    IomapIter {
        pos: u64,
        direct: bool,
    },
    /// iomap_iter_dstmap: that step's mapping (file byte `offset` is at
    /// byte `addr` of `Hit::dev`), when it has blocks on a disk.
    IomapMap {
        addr: u64,
        offset: u64,
    },
}

/// One decoded block tracepoint hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub kind: Kind,
    pub time: u64,
    /// Kernel dev_t.
    pub dev: u64,
    pub sector: u64,
    pub nr_sector: u32,
    pub bytes: u32,
    pub rwbs: String,
    pub error: i32,
    /// The task on the CPU.
    pub task: Task,
}

/// A request between issue and completion.
struct Issued {
    issue: Hit,
    /// Who caused it, if seen.
    submitter: Option<Task>,
    /// When it was queued (insert, else block_io_start), if seen.
    queued_at: Option<u64>,
}

/// Pairs tracepoint hits into requests. Identical keys in flight at once
/// (flushes: sector 0, no sectors) are paired first in, first out.
pub struct Matcher {
    queued: bool,
    names: HashMap<DevId, String>,
    /// Partitions' (disk, first sector), by partition.
    partitions: HashMap<u64, (u64, u64)>,
    /// Who submitted the bio starting at (disk, sector), and when.
    submitters: HashMap<(u64, u64), (u64, Task)>,
    /// Each thread's last direct-I/O step's file position (iomap_iter).
    positions: HashMap<u32, u64>,
    starts: HashMap<(u64, u64), VecDeque<(u64, Task)>>,
    inserts: HashMap<(u64, u64), VecDeque<u64>>,
    inflight: HashMap<(u64, u64, u32), VecDeque<Issued>>,
    last_sweep: u64,
    /// Entries in the three tables (approximately, between sweeps).
    tracked: usize,
    /// Issued requests forgotten early to keep memory bounded.
    forgotten: u64,
}

impl Matcher {
    pub fn new(
        queued: bool,
        names: HashMap<DevId, String>,
        partitions: HashMap<u64, (u64, u64)>,
    ) -> Matcher {
        Matcher {
            queued,
            names,
            partitions,
            submitters: HashMap::new(),
            positions: HashMap::new(),
            starts: HashMap::new(),
            inserts: HashMap::new(),
            inflight: HashMap::new(),
            last_sweep: 0,
            tracked: 0,
            forgotten: 0,
        }
    }

    /// Feed hits in time order; a completion that ends a request returns it.
    pub fn feed(&mut self, hit: Hit) -> Option<BlockIo> {
        self.sweep(hit.time);
        if hit.kind != Kind::Complete {
            self.tracked += 1;
            if self.tracked > MAX_TRACKED {
                self.bound(hit.time);
            }
        }
        // Back merges keep a request's start sector; its size grows, so
        // starts and inserts are keyed without it.
        let at = (hit.dev, hit.sector);
        match hit.kind {
            // A worker sending on a bio it did not submit (blk-throttle's)
            // is not its submitter.
            Kind::Queue if hit.task.comm.starts_with("kworker/") => None,
            Kind::Queue => {
                let (disk, _) = self.on_disk(hit.dev, 0);
                self.submitters
                    .insert((disk, hit.sector), (hit.time, hit.task));
                None
            }
            Kind::IomapIter { pos, direct } => {
                match direct {
                    true => self.positions.insert(hit.task.tid, pos),
                    false => self.positions.remove(&hit.task.tid),
                };
                None
            }
            Kind::IomapMap { addr, offset } => {
                // iomap_sector(): the step's bio starts at the mapped
                // address of its position.
                let pos = self.positions.remove(&hit.task.tid)?;
                let byte = addr.wrapping_add(pos).wrapping_sub(offset);
                let at = self.on_disk(hit.dev, byte >> 9);
                self.submitters.insert(at, (hit.time, hit.task));
                None
            }
            Kind::Start => {
                self.starts
                    .entry(at)
                    .or_default()
                    .push_back((hit.time, hit.task));
                None
            }
            Kind::Insert => {
                self.inserts.entry(at).or_default().push_back(hit.time);
                None
            }
            Kind::Issue => {
                let start = pop(&mut self.starts, at);
                let insert = pop(&mut self.inserts, at);
                let submitter = self.submitters.remove(&at).map(|s| s.1);
                let key = (hit.dev, hit.sector, hit.nr_sector);
                self.inflight.entry(key).or_default().push_back(Issued {
                    queued_at: insert
                        .or(start.as_ref().map(|s| s.0))
                        .filter(|&t| t <= hit.time),
                    submitter: submitter.or(start.map(|s| s.1)),
                    issue: hit,
                });
                None
            }
            Kind::Complete => {
                let issued = pop(&mut self.inflight, (hit.dev, hit.sector, hit.nr_sector))?;
                Some(self.request(issued, hit))
            }
        }
    }

    fn request(&self, i: Issued, done: Hit) -> BlockIo {
        let issuer = i.issue.task;
        let cause = i.submitter.unwrap_or_else(|| issuer.clone());
        let start_ns = match (self.queued, i.queued_at) {
            (true, Some(t)) => t,
            _ => i.issue.time,
        };
        let dev = DevId::from_kernel(i.issue.dev);
        BlockIo {
            comm: cause.comm.clone(),
            pid: cause.pid,
            tid: cause.tid,
            issuer: (issuer.pid != cause.pid).then_some(issuer),
            rwbs: i.issue.rwbs,
            dev,
            disk: self.names.get(&dev).cloned().unwrap_or_default(),
            sector: i.issue.sector,
            bytes: i.issue.bytes as u64,
            start_ns,
            issue_ns: i.issue.time,
            end_ns: done.time,
            queue_ns: i.queued_at.map(|t| i.issue.time - t),
            latency_ns: done.time.saturating_sub(start_ns),
            error: done.error,
        }
    }

    /// A device and sector as the requests name them: a partition's on its
    /// disk.
    fn on_disk(&self, dev: u64, sector: u64) -> (u64, u64) {
        match self.partitions.get(&dev) {
            Some(&(disk, start)) => (disk, start + sector),
            None => (dev, sector),
        }
    }

    /// Issued requests still waiting for their completion.
    pub fn unmatched(&self) -> u64 {
        self.inflight.values().map(|q| q.len() as u64).sum()
    }

    /// Issued requests forgotten before their completion came, to keep
    /// memory bounded under a storm.
    pub fn forgotten(&self) -> u64 {
        self.forgotten
    }

    /// Forget what never completed (merged into another request, or lost).
    fn sweep(&mut self, now: u64) {
        if now < self.last_sweep + STALE_NS {
            return;
        }
        self.last_sweep = now;
        self.forget_before(now.saturating_sub(STALE_NS));
    }

    /// Too much is waiting: forget sooner, then sooner still.
    fn bound(&mut self, now: u64) {
        for horizon in [SHORT_STALE_NS, REORDER_NS] {
            let before = self.unmatched();
            self.forget_before(now.saturating_sub(horizon));
            self.forgotten += before - self.unmatched();
            if self.tracked <= MAX_TRACKED / 2 {
                return;
            }
        }
    }

    fn forget_before(&mut self, old: u64) {
        self.submitters.retain(|_, (t, _)| *t >= old);
        self.starts.retain(|_, q| {
            q.retain(|(t, _)| *t >= old);
            !q.is_empty()
        });
        self.inserts.retain(|_, q| {
            q.retain(|t| *t >= old);
            !q.is_empty()
        });
        self.inflight.retain(|_, q| {
            q.retain(|i| i.issue.time >= old);
            !q.is_empty()
        });
        let len = |n: usize, q: usize| n + q;
        self.tracked = self.submitters.len()
            + self.starts.values().map(VecDeque::len).fold(0, len)
            + self.inserts.values().map(VecDeque::len).fold(0, len)
            + self.inflight.values().map(VecDeque::len).fold(0, len);
    }
}

fn pop<K: std::hash::Hash + Eq, V>(m: &mut HashMap<K, VecDeque<V>>, k: K) -> Option<V> {
    let q = m.get_mut(&k)?;
    let v = q.pop_front();
    if q.is_empty() {
        m.remove(&k);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const VDA: u64 = 254 << 20;

    fn hit(kind: Kind, time: u64, sector: u64, nr: u32, pid: u32, comm: &str) -> Hit {
        Hit {
            kind,
            time,
            dev: VDA,
            sector,
            nr_sector: nr,
            bytes: nr * 512,
            rwbs: "W".into(),
            error: 0,
            task: Task {
                pid,
                tid: pid,
                comm: comm.into(),
            },
        }
    }

    fn matcher(queued: bool) -> Matcher {
        Matcher::new(
            queued,
            [(DevId::new(254, 0), "vda".to_string())].into(),
            [(VDA + 1, (VDA, 2048))].into(),
        )
    }

    #[test]
    fn submitter_issue_complete() {
        let mut m = matcher(false);
        assert!(m.feed(hit(Kind::Start, 100, 8, 8, 42, "writer")).is_none());
        assert!(
            m.feed(hit(Kind::Issue, 150, 8, 16, 7, "kworker/0:1H"))
                .is_none()
        );
        let io = m
            .feed(hit(Kind::Complete, 1150, 8, 16, 0, "swapper/0"))
            .unwrap();
        assert_eq!(
            (io.pid, io.comm.as_str(), io.bytes, io.latency_ns),
            (42, "writer", 8192, 1000)
        );
        assert_eq!(io.issuer.unwrap().comm, "kworker/0:1H");
        assert_eq!((io.disk.as_str(), io.queue_ns), ("vda", Some(50)));
    }

    #[test]
    fn queued_latency_counts_from_insert() {
        let mut m = matcher(true);
        m.feed(hit(Kind::Start, 100, 8, 8, 42, "w"));
        m.feed(hit(Kind::Insert, 120, 8, 8, 42, "w"));
        m.feed(hit(Kind::Issue, 150, 8, 8, 42, "w"));
        let io = m.feed(hit(Kind::Complete, 1150, 8, 8, 0, "")).unwrap();
        assert_eq!(
            (io.latency_ns, io.queue_ns, io.issuer),
            (1030, Some(30), None)
        );
    }

    #[test]
    fn flushes_pair_first_in_first_out() {
        let mut m = matcher(false);
        m.feed(hit(Kind::Issue, 10, 0, 0, 1, "jbd2/vda-8"));
        m.feed(hit(Kind::Issue, 20, 0, 0, 2, "fsync"));
        let a = m.feed(hit(Kind::Complete, 110, 0, 0, 0, "")).unwrap();
        let b = m.feed(hit(Kind::Complete, 130, 0, 0, 0, "")).unwrap();
        assert_eq!((a.pid, a.latency_ns, b.pid, b.latency_ns), (1, 100, 2, 110));
        // A completion nobody issued (tracing began mid-flight) is dropped.
        assert!(m.feed(hit(Kind::Complete, 140, 0, 0, 0, "")).is_none());
    }

    #[test]
    fn a_throttled_direct_read_is_charged_to_its_submitter() {
        let mut m = matcher(false);
        // The reader maps file byte 4096 of an extent at file byte 0, disk
        // byte 1 MiB of partition vda1; blk-throttle holds its bio back and
        // a kworker sends it on, allocates and issues its request.
        let reader = |kind| hit(kind, 10, 0, 0, 42, "bio-read-3");
        m.feed(reader(Kind::IomapIter {
            pos: 4096,
            direct: true,
        }));
        let mut map = reader(Kind::IomapMap {
            addr: 1 << 20,
            offset: 0,
        });
        map.dev = VDA + 1;
        m.feed(map);
        let sector = 2048 + (1 << 20) / 512 + 8;
        m.feed(hit(Kind::Queue, 50, sector, 1, 7, "kworker/0:2"));
        m.feed(hit(Kind::Start, 51, sector, 1, 7, "kworker/0:2"));
        m.feed(hit(Kind::Issue, 52, sector, 1, 7, "kworker/0:2"));
        let io = m.feed(hit(Kind::Complete, 60, sector, 1, 0, "")).unwrap();
        assert_eq!((io.pid, io.comm.as_str()), (42, "bio-read-3"));
        assert_eq!(io.issuer.unwrap().comm, "kworker/0:2");
    }

    #[test]
    fn a_bio_queued_on_a_partition_names_its_submitter() {
        let mut m = matcher(false);
        let mut queued = hit(Kind::Queue, 10, 4096, 8, 42, "dd");
        queued.dev = VDA + 1;
        m.feed(queued);
        m.feed(hit(Kind::Issue, 20, 4096, 8, 7, "kworker/1:1H"));
        let io = m.feed(hit(Kind::Complete, 30, 4096, 8, 0, "")).unwrap();
        assert_eq!((io.pid, io.issuer.map(|t| t.pid)), (42, Some(7)));
    }

    #[test]
    fn without_io_start_the_issuer_is_the_cause() {
        let mut m = matcher(false);
        m.feed(hit(Kind::Issue, 10, 64, 8, 9, "dd"));
        let io = m.feed(hit(Kind::Complete, 30, 64, 8, 0, "")).unwrap();
        assert_eq!((io.pid, io.issuer), (9, None));
    }

    #[test]
    fn a_storm_of_unmatched_issues_stays_bounded() {
        let mut m = matcher(false);
        // Completions lost: issues 10 µs apart pile up for 4 s.
        let n = 400_000u64;
        for i in 0..n {
            m.feed(hit(Kind::Issue, i * 10_000, i * 8, 8, 9, "fio"));
            assert!(m.tracked <= MAX_TRACKED + 1, "{} tracked at {i}", m.tracked);
        }
        assert!(m.unmatched() as usize <= MAX_TRACKED);
        assert_eq!(m.forgotten() + m.unmatched(), n);
        // What is recent still matches.
        let last = (n - 1) * 10_000;
        let done = m.feed(hit(Kind::Complete, last + 5_000, (n - 1) * 8, 8, 0, ""));
        assert_eq!(done.map(|io| io.pid), Some(9));
    }

    #[test]
    fn stale_entries_are_forgotten() {
        let mut m = matcher(false);
        m.feed(hit(Kind::Start, 10, 64, 8, 9, "dd"));
        m.feed(hit(Kind::Issue, 20, 128, 8, 9, "dd"));
        m.feed(hit(Kind::Issue, STALE_NS * 3, 256, 8, 9, "dd"));
        assert!(m.starts.is_empty());
        assert_eq!(m.inflight.len(), 1);
    }
}
