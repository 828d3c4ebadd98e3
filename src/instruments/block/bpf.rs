//! Tier B of iosnoop: biosnoop.bpf.c on tp_btf block_io_start / rq_insert /
//! rq_issue / rq_complete, requests keyed by their `struct request *`, and
//! block_bio_queue / block_split / iomap_iter_dstmap /
//! mm_filemap_add_to_page_cache for who submitted them (a bio held back by
//! blk-throttle is issued by a kworker: see the C source).
//!
//! The `Ebpf` handle owns the programs and their links: dropping `BlockBpf`
//! detaches everything.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::time::Duration;

use anyhow::Context;
use aya::Btf;
use aya::maps::{HashMap as BpfHashMap, MapData, PerCpuArray, RingBuf};
use aya::programs::BtfTracePoint;

use super::source::{BlockSource, Options};
use crate::instruments::{Source, Tier};
use crate::model::block::{BlockIo, DevId, LatencyCount, Task};

#[repr(C)]
#[derive(Clone, Copy)]
struct TaskId {
    pid: u32,
    tid: u32,
    uid: u32,
    comm: [u8; 16],
}

/// `struct event` of biosnoop.bpf.c.
#[repr(C)]
#[derive(Clone, Copy)]
struct Event {
    io_start_ns: u64,
    insert_ns: u64,
    issue_ns: u64,
    complete_ns: u64,
    sector: u64,
    dev: u32,
    bytes: u32,
    error: i32,
    _pad: u32,
    submitter: TaskId,
    issuer: TaskId,
    rwbs: [u8; 8],
}

/// `struct hist_key` of biosnoop.bpf.c.
#[repr(C)]
#[derive(Clone, Copy)]
struct HistKey {
    dev: u32,
    slot: u32,
    pid: u32,
    rwbs: [u8; 8],
    comm: [u8; 16],
}

// SAFETY: plain C structs of integers and byte arrays, no padding.
unsafe impl aya::Pod for HistKey {}

pub struct BlockBpf {
    ebpf: crate::sys::bpf::Loaded,
    events: RingBuf<MapData>,
    options: Options,
    names: HashMap<DevId, String>,
}

impl BlockBpf {
    /// Load and attach the programs. `names` labels devices.
    pub fn start(options: Options, names: HashMap<DevId, String>) -> anyhow::Result<BlockBpf> {
        let dev = options.dev.map_or(0, |d| d.to_kernel() as u32);
        let queued = options.queued as u8;
        let hist_only = options.hist_only as u8;
        let uid = options.uid.unwrap_or(u32::MAX);
        let load = |unused: &str| {
            crate::sys::bpf::load_with(
                crate::sys::bpf::objects::BIOSNOOP,
                "block I/O tracing with BPF",
                &[
                    ("filter_dev", &dev.to_ne_bytes()),
                    ("queued", &[queued]),
                    ("hist_only", &[hist_only]),
                    ("filter_uid", &uid.to_ne_bytes()),
                ],
                &[(unused, 1)],
            )
        };
        let btf = crate::sys::bpf::kernel_btf()
            .context("reading the kernel's BTF (/sys/kernel/btf/vmlinux)")?;
        // The request programs claim their in-flight entries with
        // compare-and-swap (>= 5.12); where the kernel refuses it, the
        // object again with their copies (`_h`) that keep them in a hash
        // map. Completion first: it only reads what the others track.
        let mut ebpf = load("inflight_h")?;
        let mut h = "";
        if let Err(cas) = attach(&mut ebpf, btf, "block_rq_complete", "block_rq_complete") {
            ebpf = load("inflight")?;
            h = "_h";
            attach(&mut ebpf, btf, "block_rq_complete_h", "block_rq_complete")
                .map_err(|e| e.context(format!("{cas:#}")))?;
        }
        // >= 6.5: when a request was queued (-Q without a scheduler).
        let _ = attach(&mut ebpf, btf, "block_io_start", "block_io_start");
        // Their request_queue argument went in 5.11: the copies reading it
        // first (they do not load without it; the others would, reading
        // the queue as the bio).
        for tp in ["block_bio_queue", "block_split"] {
            if let Err(e) = attach(&mut ebpf, btf, &format!("{tp}_q"), tp) {
                attach(&mut ebpf, btf, tp, tp).map_err(|q| q.context(format!("{e:#}")))?;
            }
        }
        // Without iomap (no CONFIG_FS_IOMAP), direct I/O a throttle held
        // back is charged to the kworker that issued it.
        let _ = attach(&mut ebpf, btf, "iomap_iter_dstmap", "iomap_iter_dstmap");
        // Buffered reads a throttle held back, found by the page-cache
        // folios their reader added; without it they are charged to the
        // kworker, as above.
        let _ = attach(
            &mut ebpf,
            btf,
            "filemap_add",
            "mm_filemap_add_to_page_cache",
        );
        if options.queued {
            attach(
                &mut ebpf,
                btf,
                &format!("block_rq_insert{h}"),
                "block_rq_insert",
            )?;
        }
        attach(
            &mut ebpf,
            btf,
            &format!("block_rq_issue{h}"),
            "block_rq_issue",
        )?;
        let events = RingBuf::try_from(ebpf.take_map("events").context("no events map")?)?;
        Ok(BlockBpf {
            ebpf,
            events,
            options,
            names,
        })
    }

    /// Wait up to `timeout` for events.
    fn wait(&self, timeout: Duration) {
        let mut fd = libc::pollfd {
            fd: self.events.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; EINTR (Ctrl-C) just returns early.
        unsafe { libc::poll(&mut fd, 1, timeout.as_millis() as i32) };
    }

    /// Move every completed request into `out`.
    fn drain(&mut self, out: &mut Vec<BlockIo>) {
        while let Some(item) = self.events.next() {
            if item.len() < size_of::<Event>() {
                continue;
            }
            // SAFETY: the kernel wrote a whole `struct event`; read_unaligned
            // copes with the ring's 8-byte alignment.
            let e: Event = unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) };
            out.push(convert(&e, &self.options, &self.names));
        }
    }

    /// Events dropped: the ring buffer was full (index 0 of the `lost`
    /// map), or the in-flight table had no free way for a request (index 1).
    fn lost_events(&self) -> u64 {
        let Some(map) = self.ebpf.map("lost") else {
            return 0;
        };
        let Ok(arr) = PerCpuArray::<_, u64>::try_from(map) else {
            return 0;
        };
        [0, 1]
            .iter()
            .filter_map(|i| arr.get(i, 0).ok())
            .map(|v| v.iter().sum::<u64>())
            .sum()
    }

    /// The in-kernel latency histogram (with `hist_only`).
    fn kernel_hist(&self) -> anyhow::Result<Vec<LatencyCount>> {
        let map = self.ebpf.map("hist").context("no hist map")?;
        let hist = BpfHashMap::<_, HistKey, u64>::try_from(map)?;
        let mut out = Vec::new();
        for entry in hist.iter() {
            let (k, count) = entry.context("reading the latency histogram")?;
            let dev = DevId::from_kernel(k.dev as u64);
            out.push(LatencyCount {
                dev,
                disk: self.names.get(&dev).cloned().unwrap_or_default(),
                rwbs: cstr(&k.rwbs),
                pid: k.pid,
                comm: cstr(&k.comm),
                slot: k.slot,
                count,
            });
        }
        Ok(out)
    }
}

impl Source for BlockBpf {
    type Event = BlockIo;

    fn tier(&self) -> Tier {
        Tier::Bpf
    }

    fn poll(&mut self, timeout: Duration, out: &mut Vec<BlockIo>) -> anyhow::Result<()> {
        self.wait(timeout);
        self.drain(out);
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<BlockIo>) -> anyhow::Result<()> {
        self.drain(out);
        Ok(())
    }

    fn lost(&self) -> u64 {
        self.lost_events()
    }

    fn notes(&self) -> Vec<String> {
        match self.unseen() {
            0 => Vec::new(),
            n => vec![format!(
                "BPF tier: the kernel skipped kdiag's block programs {n} times (one was already \
                 running on that CPU when a completion interrupt came: recursion_misses); \
                 up to {n} requests are missing."
            )],
        }
    }
}

impl BlockSource for BlockBpf {
    fn unseen(&self) -> u64 {
        crate::sys::bpf::recursion_misses(&self.ebpf).unwrap_or(0)
    }

    fn hist(&self) -> anyhow::Result<Option<Vec<LatencyCount>>> {
        self.kernel_hist().map(Some)
    }
}

/// Load program `name` for tracepoint `tp` and attach it.
fn attach(ebpf: &mut aya::Ebpf, btf: &Btf, name: &str, tp: &str) -> anyhow::Result<()> {
    let prog: &mut BtfTracePoint = ebpf
        .program_mut(name)
        .with_context(|| format!("no program {name} in biosnoop.bpf.o"))?
        .try_into()?;
    prog.load(tp, btf)
        .with_context(|| format!("loading the BPF program {name} for tracepoint {tp}"))?;
    prog.attach()
        .with_context(|| format!("attaching to tracepoint {tp}"))?;
    Ok(())
}

fn task(t: &TaskId) -> Task {
    Task {
        pid: t.pid,
        tid: t.tid,
        comm: cstr(&t.comm),
    }
}

fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn convert(e: &Event, options: &Options, names: &HashMap<DevId, String>) -> BlockIo {
    let cause = if e.submitter.pid != 0 || e.submitter.tid != 0 {
        &e.submitter
    } else {
        &e.issuer
    };
    let dev = DevId::from_kernel(e.dev as u64);
    // With the scheduler bypassed there is no insert: the request was
    // queued from its creation (block_io_start).
    let queued_at = [e.insert_ns, e.io_start_ns]
        .into_iter()
        .find(|&t| t != 0 && t <= e.issue_ns);
    let start_ns = match (options.queued, queued_at) {
        (true, Some(t)) => t,
        _ => e.issue_ns,
    };
    BlockIo {
        comm: cstr(&cause.comm),
        pid: cause.pid,
        tid: cause.tid,
        issuer: (e.issuer.pid != cause.pid).then(|| task(&e.issuer)),
        rwbs: cstr(&e.rwbs),
        dev,
        disk: names.get(&dev).cloned().unwrap_or_default(),
        // The kernel's tracepoints show an unset start sector (flushes) as 0.
        sector: if e.sector == u64::MAX { 0 } else { e.sector },
        bytes: e.bytes as u64,
        start_ns,
        issue_ns: e.issue_ns,
        end_ns: e.complete_ns,
        queue_ns: queued_at.map(|t| e.issue_ns - t),
        latency_ns: e.complete_ns.saturating_sub(start_ns),
        error: e.error,
    }
}
