//! Tier A of iosnoop: block tracepoints through the perf engine, requests
//! matched by (dev, sector, nr_sector) because perf records carry no request
//! pointer. Merges and requeues can skew latencies; the command says so.
//!
//! Who caused a request is whoever submitted the bio at its first sector:
//! block_bio_queue names it, except for a bio blk-throttle held back (io.max,
//! blkio.throttle.*), which a kworker sends on, queues and issues; a direct
//! I/O's submitter is then known from its mapping (iomap_iter and
//! iomap_iter_dstmap, in its own context). block_io_start (>= 6.5) marks
//! when a request was queued; block_rq_issue names who issued it and starts
//! the clock (block_rq_insert with -Q); block_rq_complete ends it.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use anyhow::Context;

use super::source::{BlockSource, Options};
use crate::instruments::{Source, Tier};
use crate::model::block::{BlockIo, DevId, Task};
use crate::sys::perf::{Counter, EventSpec, Record, Session, Target};
use crate::sys::tracefs::{EventFormat, Field, Tracefs};

/// Per-CPU ring size in pages: ~8k records per CPU, room for 100 ms at
/// tens of thousands of IOPS.
const RING_PAGES: usize = 256;
/// Records younger than this stay buffered, so records of other CPUs that
/// happened earlier but were not yet drained are matched in time order.
const REORDER_NS: u64 = 50_000_000;
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
    IomapIter { pos: u64, direct: bool },
    /// iomap_iter_dstmap: that step's mapping (file byte `offset` is at
    /// byte `addr` of `Hit::dev`), when it has blocks on a disk.
    IomapMap { addr: u64, offset: u64 },
}

/// iomap's IOMAP_DIRECT flag and extent types with an address
/// (include/linux/iomap.h; unchanged since 5.15, when the tracepoints came).
const IOMAP_DIRECT: u64 = 1 << 4;
const IOMAP_MAPPED: u64 = 2;
const IOMAP_UNWRITTEN: u64 = 3;

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

/// How to read one tracepoint's records.
enum Decoder {
    Block(BlockDecoder),
    /// iomap_iter: pos, flags.
    IomapIter { pos: Field, flags: Field },
    /// iomap_iter_dstmap: bdev, addr, offset, type.
    IomapMap {
        bdev: Field,
        addr: Field,
        offset: Field,
        kind: Field,
    },
}

impl Decoder {
    fn new(kind: Kind, f: &EventFormat) -> anyhow::Result<Decoder> {
        Ok(match kind {
            Kind::IomapIter { .. } => Decoder::IomapIter {
                pos: f.field("pos")?,
                flags: f.field("flags")?,
            },
            Kind::IomapMap { .. } => Decoder::IomapMap {
                bdev: f.field("bdev")?,
                addr: f.field("addr")?,
                offset: f.field("offset")?,
                kind: f.field("type")?,
            },
            _ => Decoder::Block(BlockDecoder::new(kind, f)?),
        })
    }

    fn decode(&self, raw: &[u8], time: u64, pid: u32, tid: u32) -> Option<Hit> {
        let iomap = |kind, dev| Hit {
            kind,
            time,
            dev,
            sector: 0,
            nr_sector: 0,
            bytes: 0,
            rwbs: String::new(),
            error: 0,
            task: Task {
                pid,
                tid,
                // Named by the matcher from the thread's other records,
                // else /proc (one read per thread, not per record).
                comm: String::new(),
            },
        };
        match self {
            Decoder::Block(d) => d.decode(raw, time, pid, tid),
            Decoder::IomapIter { pos, flags } => Some(iomap(
                Kind::IomapIter {
                    pos: pos.u64(raw)?,
                    direct: flags.u64(raw)? & IOMAP_DIRECT != 0,
                },
                0,
            )),
            Decoder::IomapMap {
                bdev,
                addr,
                offset,
                kind,
            } => {
                let kind = kind.u64(raw)?;
                (kind == IOMAP_MAPPED || kind == IOMAP_UNWRITTEN).then_some(())?;
                Some(iomap(
                    Kind::IomapMap {
                        addr: addr.u64(raw)?,
                        offset: offset.u64(raw)?,
                    },
                    bdev.u64(raw)?,
                ))
            }
        }
    }
}

struct BlockDecoder {
    kind: Kind,
    dev: Field,
    sector: Field,
    nr_sector: Field,
    bytes: Option<Field>,
    rwbs: Option<Field>,
    error: Option<Field>,
    comm: Option<Field>,
}

impl BlockDecoder {
    fn new(kind: Kind, f: &EventFormat) -> anyhow::Result<BlockDecoder> {
        Ok(BlockDecoder {
            kind,
            dev: f.field("dev")?,
            sector: f.field("sector")?,
            nr_sector: f.field("nr_sector")?,
            bytes: f.try_field("bytes").cloned(),
            rwbs: f.try_field("rwbs").cloned(),
            error: f.try_field("error").cloned(),
            comm: f.try_field("comm").cloned(),
        })
    }

    fn decode(&self, raw: &[u8], time: u64, pid: u32, tid: u32) -> Option<Hit> {
        let nr_sector = self.nr_sector.u64(raw)? as u32;
        Some(Hit {
            kind: self.kind,
            time,
            dev: self.dev.u64(raw)?,
            sector: self.sector.u64(raw)?,
            nr_sector,
            bytes: match &self.bytes {
                Some(b) => b.u64(raw)? as u32,
                None => nr_sector * 512,
            },
            rwbs: self
                .rwbs
                .as_ref()
                .and_then(|f| f.str(raw))
                .unwrap_or_default()
                .into_owned(),
            error: self.error.as_ref().and_then(|f| f.i64(raw)).unwrap_or(0) as i32,
            task: Task {
                pid,
                tid,
                // Only starts, queues and issues name a task; completions
                // and inserts run on whatever CPU the interrupt hit.
                comm: match (&self.comm, self.kind) {
                    (_, Kind::Complete | Kind::Insert) => String::new(),
                    (Some(f), _) => f.str(raw).unwrap_or_default().into_owned(),
                    (None, _) => comm_of(tid),
                },
            },
        })
    }
}

/// Name a task from its thread's last name seen, else /proc; learn the
/// name records carry. Bounded: forgotten wholesale past 4096 threads.
fn name(comms: &mut HashMap<u32, String>, task: &mut Task) {
    if comms.len() > 4096 {
        comms.clear();
    }
    if task.comm.is_empty() {
        task.comm = comms
            .entry(task.tid)
            .or_insert_with(|| comm_of(task.tid))
            .clone();
    } else if comms.get(&task.tid) != Some(&task.comm) {
        comms.insert(task.tid, task.comm.clone());
    }
}

/// Each partition's disk and first sector on it (/sys/dev/block/M:m/start
/// and its parent's dev): block_bio_queue and iomap name a partition, the
/// requests its disk.
fn partitions() -> HashMap<u64, (u64, u64)> {
    let read = |p: std::path::PathBuf| std::fs::read_to_string(p).ok();
    let Ok(dir) = std::fs::read_dir("/sys/dev/block") else {
        return HashMap::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let dev = kernel_dev(e.file_name().to_str()?)?;
            let start = read(e.path().join("start"))?.trim().parse().ok()?;
            let disk = kernel_dev(read(e.path().join("../dev"))?.trim())?;
            Some((dev, (disk, start)))
        })
        .collect()
}

/// "M:m" as the kernel's dev_t.
fn kernel_dev(s: &str) -> Option<u64> {
    let (major, minor) = s.split_once(':')?;
    Some(DevId::new(major.parse().ok()?, minor.parse().ok()?).to_kernel())
}

fn comm_of(tid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{tid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

pub struct BlockPerf {
    session: Session,
    /// Decoders by tracepoint id.
    decoders: HashMap<u64, Decoder>,
    pending: Vec<Hit>,
    matcher: Matcher,
    /// Threads' names, for the iomap records that carry none.
    comms: HashMap<u32, String>,
    /// Completions the kernel counted, to compare with the samples delivered.
    completions: Counter,
    /// The counter's value just before the final drain.
    counted_completions: Option<u64>,
    delivered_completions: u64,
}

impl BlockPerf {
    pub fn start(options: Options, names: HashMap<DevId, String>) -> anyhow::Result<BlockPerf> {
        let fs = Tracefs::open()?;
        if !fs.has_event("block", "block_rq_issue") || !fs.has_event("block", "block_rq_complete") {
            anyhow::bail!(
                "this kernel has no block tracepoints (block:block_rq_issue, block:block_rq_complete); \
                 it needs CONFIG_BLOCK and CONFIG_TRACEPOINTS"
            );
        }
        let mut wanted = vec![
            (Kind::Issue, "block", "block_rq_issue"),
            (Kind::Complete, "block", "block_rq_complete"),
            (Kind::Queue, "block", "block_bio_queue"),
        ];
        if fs.has_event("block", "block_io_start") {
            wanted.push((Kind::Start, "block", "block_io_start"));
        }
        if options.queued {
            wanted.push((Kind::Insert, "block", "block_rq_insert"));
        }
        // Without them (no CONFIG_FS_IOMAP), direct I/O a throttle held
        // back is charged to the kworker that issued it.
        if fs.has_event("iomap", "iomap_iter") && fs.has_event("iomap", "iomap_iter_dstmap") {
            let pos = Kind::IomapIter {
                pos: 0,
                direct: true,
            };
            let map = Kind::IomapMap { addr: 0, offset: 0 };
            wanted.push((pos, "iomap", "iomap_iter"));
            wanted.push((map, "iomap", "iomap_iter_dstmap"));
        }
        let mut decoders = HashMap::new();
        let mut specs = Vec::new();
        let mut complete_spec = None;
        for (kind, system, name) in wanted {
            let format = fs.event(system, name)?;
            let mut spec = EventSpec::tracepoint(format.id);
            match kind {
                // Only direct I/O: buffered steps submit nothing themselves.
                Kind::IomapIter { .. } => spec = spec.with_filter(format!("flags & {IOMAP_DIRECT}")),
                Kind::IomapMap { .. } => {}
                // block_bio_queue's dev is a partition's: filtered by the
                // requests it is matched with.
                Kind::Queue => {}
                _ => {
                    if let Some(dev) = options.dev {
                        spec = spec.with_filter(format!("dev == {}", dev.to_kernel()));
                    }
                }
            }
            if kind == Kind::Complete {
                complete_spec = Some(spec.clone());
            }
            specs.push(spec);
            decoders.insert(format.id, Decoder::new(kind, &format)?);
        }
        let session = Session::open(&specs, Target::AllCpus, RING_PAGES)
            .context("opening the block tracepoints")?;
        session.enable()?;
        let completions =
            Counter::tracepoint(&complete_spec.expect("block_rq_complete is wanted"))?;
        Ok(BlockPerf {
            session,
            completions,
            counted_completions: None,
            delivered_completions: 0,
            decoders,
            pending: Vec::new(),
            matcher: Matcher::new(options.queued, names, partitions()),
            comms: HashMap::new(),
        })
    }

    /// Match what the rings hold; completed requests go to `out`. With
    /// `all`, also the records too recent to be sure of their order (at the end).
    fn drain(&mut self, out: &mut Vec<BlockIo>, all: bool) {
        if all {
            // Read before draining: every completion counted by now has its
            // sample in a ring already, unless the kernel dropped it.
            self.counted_completions = self.completions.read().ok();
        }
        let decoders = &self.decoders;
        let pending = &mut self.pending;
        let delivered = &mut self.delivered_completions;
        self.session.drain(|rec| {
            if let Record::Sample(s) = rec
                && s.raw.len() >= 2
            {
                let id = u16::from_ne_bytes([s.raw[0], s.raw[1]]) as u64;
                if let Some(d) = decoders.get(&id)
                    && let Some(hit) = d.decode(s.raw, s.time, s.pid, s.tid)
                {
                    *delivered += (hit.kind == Kind::Complete) as u64;
                    pending.push(hit);
                }
            }
        });
        pending.sort_by_key(|h| h.time);
        let cutoff = if all {
            u64::MAX
        } else {
            pending
                .last()
                .map_or(0, |h| h.time.saturating_sub(REORDER_NS))
        };
        let ready = pending.partition_point(|h| h.time <= cutoff);
        for mut hit in pending.drain(..ready) {
            if !matches!(hit.kind, Kind::Complete | Kind::Insert) {
                name(&mut self.comms, &mut hit.task);
            }
            if let Some(io) = self.matcher.feed(hit) {
                out.push(io);
            }
        }
    }

    /// (counted, delivered) completions when the kernel counted more
    /// block_rq_complete hits than it delivered as samples, without any
    /// lost record. Seen on Linux 6.18 in a VM: samples taken in the
    /// completion interrupt while that CPU is idle are counted but never
    /// written to the ring. Only the BPF tier sees those completions.
    /// Valid after the final `drain(.., true)`.
    fn undelivered(&self) -> Option<(u64, u64)> {
        let counted = self.counted_completions?;
        let delivered = self.delivered_completions;
        (counted > delivered).then_some((counted, delivered))
    }

    /// Why requests may be missing besides lost records: how often sampling
    /// was throttled, and how many issued requests never showed a completion
    /// (after `drain(.., true)`; some may just have been in flight at the end).
    fn gaps(&self) -> (u64, u64) {
        (self.session.losses().throttled, self.matcher.unmatched())
    }
}

impl Source for BlockPerf {
    type Event = BlockIo;

    fn tier(&self) -> Tier {
        Tier::Perf
    }

    fn poll(&mut self, timeout: Duration, out: &mut Vec<BlockIo>) -> anyhow::Result<()> {
        self.session.poll(timeout)?;
        self.drain(out, false);
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<BlockIo>) -> anyhow::Result<()> {
        self.drain(out, true);
        Ok(())
    }

    /// Records the kernel dropped because a ring was full.
    fn lost(&self) -> u64 {
        self.session.losses().lost
    }

    /// Why requests may be missing besides lost records (after `finish`).
    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        let (throttled, unmatched) = self.gaps();
        if throttled > 0 {
            notes.push(format!(
                "perf tier: the kernel throttled the block tracepoints {throttled} times; requests are missing."
            ));
        }
        if unmatched > 0 {
            notes.push(format!(
                "perf tier: {unmatched} issued requests showed no completion (in flight at the end, \
                 or their completion records were not delivered)."
            ));
        }
        let forgotten = self.matcher.forgotten();
        if forgotten > 0 {
            notes.push(format!(
                "perf tier: {forgotten} issued requests were forgotten unmatched to keep memory \
                 bounded (too many records were lost to match them); use --tier bpf under such load."
            ));
        }
        if let Some((counted, delivered)) = self.undelivered() {
            notes.push(format!(
                "perf tier: the kernel counted {counted} completions but delivered only {delivered} \
                 as samples (no records were lost): this kernel drops tracepoint samples taken in \
                 an interrupt on an idle CPU. Latencies are missing for those requests; \
                 use --tier bpf for exact results."
            ));
        }
        notes
    }
}

impl BlockSource for BlockPerf {
    fn unseen(&self) -> u64 {
        self.undelivered()
            .map_or(0, |(counted, delivered)| counted - delivered)
    }
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
                self.submitters.insert((disk, hit.sector), (hit.time, hit.task));
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
