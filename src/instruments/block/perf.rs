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

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Context;

use super::matcher::{Hit, Kind, Matcher, REORDER_NS};
use super::source::{BlockSource, Options};
use crate::instruments::{Source, Tier};
use crate::model::block::{BlockIo, DevId, Task};
use crate::sys::perf::{Counter, EventSpec, Record, Session, Target};
use crate::sys::tracefs::{EventFormat, Field, Tracefs};

/// Per-CPU ring size in pages: ~8k records per CPU, room for 100 ms at
/// tens of thousands of IOPS.
const RING_PAGES: usize = 256;

/// iomap's IOMAP_DIRECT flag and extent types with an address
/// (include/linux/iomap.h; unchanged since 5.15, when the tracepoints came).
const IOMAP_DIRECT: u64 = 1 << 4;
const IOMAP_MAPPED: u64 = 2;
const IOMAP_UNWRITTEN: u64 = 3;

/// How to read one tracepoint's records.
enum Decoder {
    Block(BlockDecoder),
    /// iomap_iter: pos, flags.
    IomapIter {
        pos: Field,
        flags: Field,
    },
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
                Kind::IomapIter { .. } => {
                    spec = spec.with_filter(format!("flags & {IOMAP_DIRECT}"))
                }
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
