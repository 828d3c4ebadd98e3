//! The BPF tier of `kdiag offcpu`: offcpu.bpf.c on the scheduler's switch
//! tracepoint (tp_btf, else raw_tp), filtered in the kernel by a bitmap of
//! watched tgids and aggregated there by (tgid, tid, kernel stack, user
//! stack, state). User space reads the aggregation once, at the end; per
//! thread, it also drains the ring of block ends every 100 ms to learn when
//! each block's time was spent.
//!
//! Every kernel resource is owned by the `aya::Ebpf` handle (program fds,
//! link fds, map fds): dropping `OffcpuBpf`, or the process dying by any
//! signal, closes them and the kernel detaches and frees everything.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use anyhow::Context;
use aya::Btf;
use aya::maps::{HashMap as BpfHashMap, MapData, RingBuf, StackTraceMap};
use aya::programs::RawTracePoint;

use super::source::{Found, Options};
use super::trim::{trim_machinery, trim_waker};
use crate::instruments::profile::sideband::{Sideband, half};
use crate::instruments::profile::symbolize::{CountedStack, RecordOptions, Recorder, WakerStack};
use crate::instruments::{ReportSource, Tier};
use crate::model::offcpu::{BlockCounts, Collection};
use crate::model::profile::{OffState, Profile, WeightUnit};
use crate::sys::bpf::Captured;

/// The stack ids of a start `seed_asleep` gave a thread already asleep.
const ASLEEP_BEFORE: i32 = -1000;

/// `struct block_start` of offcpu.bpf.c.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Start {
    ts: u64,
    tgid: u32,
    kstack: i32,
    ustack: i32,
    state: u32,
}

/// `struct block_key` of offcpu.bpf.c.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    tgid: u32,
    pid: u32,
    kstack: i32,
    ustack: i32,
    state: u32,
}

/// `struct block_value` of offcpu.bpf.c.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Value {
    total_ns: u64,
    count: u64,
}

/// `struct waker` of offcpu.bpf.c.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct WakerRec {
    tgid: u32,
    pid: u32,
    kstack: i32,
    ustack: i32,
    comm: [u8; 16],
}

/// `struct wake_key` of offcpu.bpf.c.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct WakeKey {
    block: Key,
    waker: WakerRec,
}

/// `struct block_end` of offcpu.bpf.c: a block as it ended.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct End {
    end_ns: u64,
    ns: u64,
    key: WakeKey,
    woken: u32,
}

// SAFETY: plain C structs of integers without padding (checked below).
unsafe impl aya::Pod for Start {}
unsafe impl aya::Pod for Key {}
unsafe impl aya::Pod for Value {}
unsafe impl aya::Pod for WakeKey {}
const _: () = assert!(
    size_of::<Start>() == 24
        && size_of::<Key>() == 20
        && size_of::<WakerRec>() == 32
        && size_of::<WakeKey>() == 52
        && size_of::<End>() == 72
);

/// `enum state_class` of offcpu.bpf.c, in order.
const STATE_CLASSES: [OffState; 6] = [
    OffState::R,
    OffState::S,
    OffState::D,
    OffState::I,
    OffState::T,
    OffState::Other,
];

/// Indexes of the `counters` map (`enum counter`).
const C_KSTACK_LOST: u32 = 0;
const C_USTACK_LOST: u32 = 1;
const C_USTACK_FAULT: u32 = 2;
const C_START_FULL: u32 = 3;
const C_BLOCKED_FULL: u32 = 4;
const C_SHORT: u32 = 5;
const C_BLOCKS: u32 = 6;
const C_WAKES: u32 = 7;
const C_ENDS_LOST: u32 = 8;

/// Time blocked on one (thread, stacks, state).
#[derive(Debug, Clone)]
pub struct Block {
    pub tgid: u32,
    pub tid: u32,
    pub state: OffState,
    pub kernel: Captured,
    pub user: Captured,
    /// Asleep when tracing began (`seed_asleep`): its stack is unknown.
    pub asleep_before: bool,
    pub total_ns: u64,
    pub count: u64,
    /// Who woke the thread from this sleep (with `Options::wakers`).
    pub waker: Option<Woke>,
    /// Still going on when tracing ended: nothing has woken it yet.
    pub ongoing: bool,
    /// Per thread: each block's (CLOCK_MONOTONIC ns it ended, ns it lasted);
    /// a block still going on ends at the end of tracing.
    pub times: Vec<(u64, u64)>,
}

/// A block's place in the kernel's tables: its key, and its waker's.
type TableKey = (Key, Option<WakerRec>);
/// A block's (CLOCK_MONOTONIC ns it ended, ns it lasted), each.
type Times = Vec<(u64, u64)>;

/// The thread that woke a sleeper, as it was when it did.
#[derive(Debug, Clone)]
pub struct Woke {
    pub tgid: u32,
    pub tid: u32,
    pub comm: String,
    pub kernel: Captured,
    pub user: Captured,
}

/// Which form of the switch tracepoint the programs attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    TpBtf,
    RawTp,
}

impl Attach {
    pub fn name(self) -> &'static str {
        match self {
            Attach::TpBtf => "tp_btf",
            Attach::RawTp => "raw_tp",
        }
    }
}

/// The loaded, attached programs and their maps.
pub struct OffcpuBpf {
    ebpf: crate::sys::bpf::Loaded,
    pub attach: Attach,
    /// Programs attached, by name, until `stop`.
    attached: Vec<&'static str>,
    filter_on: bool,
    /// Sleeps are paired with their wakers: a block still going on at the
    /// end is told apart (it has no waker yet, rather than none known).
    wakers: bool,
    /// Per thread: the ring each block's end is written to.
    ends: Option<RingBuf<MapData>>,
}

/// The waking program of each attach type.
fn waking_program(attach: Attach) -> &'static str {
    match attach {
        Attach::TpBtf => "offcpu_waking",
        Attach::RawTp => "offcpu_waking_raw",
    }
}

impl OffcpuBpf {
    /// Load the programs, fill the watch bitmap and attach: tp_btf, else
    /// raw_tp; both need the kernel's BTF. The error says what each refused.
    pub fn start(options: &Options) -> anyhow::Result<OffcpuBpf> {
        let filter_on = !options.tgids.is_empty() as u8;
        let state_mask: u32 = STATE_CLASSES
            .iter()
            .enumerate()
            .filter(|(_, s)| options.states.keeps(**s))
            .map(|(i, _)| 1u32 << i)
            .sum();
        let wakers_on = options.wakers as u8;
        let times_on = options.per_thread as u8;
        let words = crate::sys::bpf::watch_words()?;
        let mut ebpf = crate::sys::bpf::load_with(
            crate::sys::bpf::objects::OFFCPU,
            "off-CPU tracing with BPF",
            &[
                ("filter_on", &[filter_on]),
                ("min_block_ns", &options.min_block_ns.to_ne_bytes()),
                ("state_mask", &state_mask.to_ne_bytes()),
                ("wakers_on", &[wakers_on]),
                ("times_on", &[times_on]),
            ],
            &[
                ("watched", words),
                (
                    "ends",
                    if times_on != 0 {
                        ENDS_BYTES
                    } else {
                        crate::sys::page_size() as u32
                    },
                ),
            ],
        )?;
        crate::sys::bpf::watch_all(&mut ebpf, &options.tgids)?;

        let ends = match options.per_thread {
            true => Some(RingBuf::try_from(
                ebpf.take_map("ends").context("no ends map")?,
            )?),
            false => None,
        };
        let mut this = OffcpuBpf {
            ebpf,
            ends,
            attach: Attach::TpBtf,
            attached: Vec::new(),
            filter_on: filter_on != 0,
            wakers: options.wakers,
        };
        // Both attach types read task_struct with CO-RE, which only the
        // kernel's BTF can relocate: without it the reads would land on the
        // wrong offsets and record nothing, so the /proc tier takes over.
        let btf = crate::sys::bpf::btf_for_core()?;
        let tp_btf = this.attach_btf("offcpu_switch", "sched_switch", btf);
        if let Err(btf_err) = tp_btf {
            this.attach_raw("offcpu_sw_raw", "sched_switch")
                .map_err(|raw_err| {
                    anyhow::anyhow!(
                        "the scheduler's switch tracepoint refused both BPF attach types: \
                         tp_btf/sched_switch: {btf_err:#}; raw_tp/sched_switch: {raw_err:#}"
                    )
                })?;
            this.attach = Attach::RawTp;
        }
        if options.follow && this.filter_on {
            match this.attach {
                Attach::TpBtf => this.attach_btf("offcpu_fork", "sched_process_fork", btf)?,
                Attach::RawTp => this.attach_raw("offcpu_fork_raw", "sched_process_fork")?,
            }
        }
        if options.wakers {
            let prog = waking_program(this.attach);
            match this.attach {
                Attach::TpBtf => this.attach_btf(prog, "sched_waking", btf)?,
                Attach::RawTp => this.attach_raw(prog, "sched_waking")?,
            }
        }
        this.seed_asleep(&options.tgids, state_mask)?;
        Ok(this)
    }

    /// The threads of `tgids` asleep now, whose blocks began before the
    /// programs saw them: each gets a start now (its stack unknown,
    /// `ASLEEP_BEFORE`), so a thread blocked the whole window counts it
    /// (it counted nothing: "0 blocks" beside threads blocked throughout).
    /// A start the program recorded meanwhile is kept (BPF_NOEXIST); one
    /// given to a thread found running just after is taken back.
    fn seed_asleep(&mut self, tgids: &[u32], state_mask: u32) -> anyhow::Result<()> {
        const NOEXIST: u64 = 1;
        let state = |tgid: u32, tid: i32| {
            let stat = std::fs::read_to_string(format!("/proc/{tgid}/task/{tid}/stat")).ok()?;
            let c = stat.rsplit_once(") ")?.1.chars().next()?;
            let class = match c {
                'S' => 1,
                'D' => 2,
                'T' | 't' => 4,
                _ => return Some(None),
            };
            Some((state_mask & (1 << class) != 0).then_some(class))
        };
        let mut starts: BpfHashMap<_, u32, Start> =
            BpfHashMap::try_from(self.ebpf.map_mut("starts").context("no starts map")?)?;
        for &tgid in tgids {
            for tid in crate::sys::procfs::tids(tgid as i32) {
                let Some(Some(class)) = state(tgid, tid) else {
                    continue;
                };
                let s = Start {
                    ts: crate::sys::monotonic_ns(),
                    tgid,
                    kstack: ASLEEP_BEFORE,
                    ustack: ASLEEP_BEFORE,
                    state: class,
                };
                // Taken meanwhile by the program: its own start stands.
                if starts.insert(tid as u32, s, NOEXIST).is_err() {
                    continue;
                }
                if state(tgid, tid).is_some_and(|c| c.is_none())
                    && starts
                        .get(&(tid as u32), 0)
                        .is_ok_and(|s| s.kstack == ASLEEP_BEFORE)
                {
                    let _ = starts.remove(&(tid as u32));
                }
            }
        }
        Ok(())
    }

    fn attach_btf(&mut self, prog: &'static str, tp: &str, btf: &Btf) -> anyhow::Result<()> {
        crate::sys::bpf::attach_tp_btf(&mut self.ebpf, "offcpu.bpf.o", prog, tp, btf)?;
        self.attached.push(prog);
        Ok(())
    }

    fn attach_raw(&mut self, prog: &'static str, tp: &str) -> anyhow::Result<()> {
        let p: &mut RawTracePoint = self
            .ebpf
            .program_mut(prog)
            .with_context(|| format!("no program {prog} in offcpu.bpf.o"))?
            .try_into()?;
        p.load().with_context(|| format!("loading raw_tp/{tp}"))?;
        p.attach(tp)
            .with_context(|| format!("attaching raw_tp/{tp}"))?;
        self.attached.push(prog);
        Ok(())
    }

    /// Watch one more process (a `-- CMD` child before it is released).
    pub fn watch(&mut self, tgid: u32) -> anyhow::Result<()> {
        crate::sys::bpf::watch(&mut self.ebpf, tgid)
    }

    /// Detach every program (the maps stay readable) and return the
    /// CLOCK_MONOTONIC time, in the programs' clock, when recording ended.
    pub fn stop(&mut self) -> anyhow::Result<u64> {
        for name in std::mem::take(&mut self.attached) {
            let prog = self.ebpf.program_mut(name).context("program vanished")?;
            // Its run time, before unloading closes it.
            crate::sys::bpf::count(prog);
            match prog {
                aya::programs::Program::BtfTracePoint(p) => p.unload()?,
                aya::programs::Program::RawTracePoint(p) => p.unload()?,
                _ => {}
            }
        }
        Ok(crate::sys::monotonic_ns())
    }

    /// Take the block ends written since the last call, onto their keys'
    /// times.
    fn drain_ends(&mut self, times: &mut HashMap<TableKey, Vec<(u64, u64)>>) {
        let Some(ring) = &mut self.ends else { return };
        while let Some(item) = ring.next() {
            if item.len() < size_of::<End>() {
                continue;
            }
            // SAFETY: the program writes whole `struct block_end`s (size
            // checked above); the read is unaligned-safe.
            let e: End = unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) };
            let waker = (e.woken != 0).then_some(e.key.waker);
            times
                .entry((e.key.block, waker))
                .or_default()
                .push((e.end_ns, e.ns));
        }
    }

    /// The counters, with `in_progress` from `collect`.
    pub fn counts(&self) -> anyhow::Result<BlockCounts> {
        let get = |i: u32| crate::sys::bpf::counter(&self.ebpf, i);
        Ok(BlockCounts {
            blocks: get(C_BLOCKS)?,
            short: get(C_SHORT)?,
            in_progress: 0,
            kernel_stacks_lost: get(C_KSTACK_LOST)?,
            user_stacks_lost: get(C_USTACK_LOST)?,
            user_stacks_unreadable: get(C_USTACK_FAULT)?,
            starts_dropped: get(C_START_FULL)?,
            table_full: get(C_BLOCKED_FULL)?,
            woken: get(C_WAKES)?,
            ends_lost: get(C_ENDS_LOST)?,
        })
    }

    /// Every aggregated block, plus the blocks still going on at `end_ns`
    /// (counted up to then, if at least `min_block_ns`), with their stacks
    /// resolved to addresses. Call after `stop`. Returns the blocks and how
    /// many were still going on. `times` (from the ring of block ends) go
    /// to their blocks; a block still going on has one, `(end_ns, its ns)`.
    fn collect(
        &self,
        end_ns: u64,
        min_block_ns: u64,
        times: &mut HashMap<TableKey, Vec<(u64, u64)>>,
    ) -> anyhow::Result<(Vec<Block>, u64)> {
        let stacks = StackTraceMap::try_from(self.ebpf.map("stacks").context("no stacks map")?)?;
        // Finished blocks by key and waker, with their times; with wakers
        // on, the blocks still going on at the end apart from them (they
        // have no waker yet).
        let mut totals: HashMap<(TableKey, bool), (Value, Times)> = self
            .totals()?
            .into_iter()
            .map(|(k, v)| ((k, false), (v, times.remove(&k).unwrap_or_default())))
            .collect();
        let mut in_progress = 0;
        for (tid, s) in self.starts()? {
            let ns = end_ns.saturating_sub(s.ts);
            if ns < min_block_ns.max(1) {
                continue;
            }
            in_progress += 1;
            let k = Key {
                tgid: s.tgid,
                pid: tid,
                kstack: s.kstack,
                ustack: s.ustack,
                state: s.state,
            };
            let (t, at) = totals.entry(((k, None), self.wakers)).or_default();
            t.total_ns += ns;
            t.count += 1;
            at.push((end_ns, ns));
        }

        let mut cache: HashMap<i32, Captured> = HashMap::new();
        let mut resolve = |id: i32, user: bool| -> Captured {
            cache
                .entry(id)
                .or_insert_with(|| crate::sys::bpf::read_stack(&stacks, id, user))
                .clone()
        };
        let blocks = totals
            .into_iter()
            .map(|(((k, waker), ongoing), (v, times))| Block {
                waker: waker.map(|w| Woke {
                    tgid: w.tgid,
                    tid: w.pid,
                    comm: comm_string(&w.comm),
                    kernel: resolve(w.kstack, false),
                    user: resolve(w.ustack, true),
                }),
                ongoing,
                times,
                ..block(&k, &v, &mut resolve)
            })
            .collect();
        Ok((blocks, in_progress))
    }

    /// The blocks that ended since the last call, taken out of the kernel's
    /// table, and their stacks out of the stack map unless a block still
    /// going on needs them: a continuous profile's window (watch's
    /// `--pyroscope`), whose tables never fill. A block counts in the window
    /// it ends in, whole, as the OpenTelemetry profiler counts it; what a
    /// thread adds to an entry between its read and its delete is lost.
    /// Wakers are not paired here.
    fn take_ended(&mut self) -> anyhow::Result<Vec<Block>> {
        let keep: HashSet<i32> = self
            .starts()?
            .values()
            .flat_map(|s| [s.kstack, s.ustack])
            .collect();
        let ended: Vec<(Key, Value)> = {
            let map = self.ebpf.map_mut("blocked").context("no blocked map")?;
            let mut blocked: BpfHashMap<_, Key, Value> = BpfHashMap::try_from(map)?;
            let all: Vec<_> = blocked.iter().filter_map(Result::ok).collect();
            for (k, _) in &all {
                let _ = blocked.remove(k);
            }
            all
        };
        let stacks = StackTraceMap::try_from(self.ebpf.map("stacks").context("no stacks map")?)?;
        let mut used: HashMap<(i32, bool), Captured> = HashMap::new();
        let mut resolve = |id: i32, user: bool| -> Captured {
            used.entry((id, user))
                .or_insert_with(|| crate::sys::bpf::read_stack(&stacks, id, user))
                .clone()
        };
        let blocks: Vec<Block> = ended
            .into_iter()
            .map(|(k, v)| block(&k, &v, &mut resolve))
            .collect();
        let map = self.ebpf.map_mut("stacks").context("no stacks map")?;
        let mut stacks = StackTraceMap::try_from(map)?;
        for (id, _) in used.into_keys() {
            if id >= 0 && !keep.contains(&id) {
                let _ = stacks.remove(&(id as u32));
            }
        }
        Ok(blocks)
    }

    /// The blocks that ended since the last window (`take_ended`), named
    /// into `profile` (weights in ns blocked) with each stack's thread
    /// (`Profile::threads`); user frames from the processes' mappings as
    /// they are now.
    pub fn window(&mut self, profile: &mut Profile) -> anyhow::Result<()> {
        let mut recorder = Recorder::new(RecordOptions {
            per_thread: true,
            ..Default::default()
        });
        for b in self.take_ended()? {
            recorder.add_stack(CountedStack {
                pid: b.tgid,
                tid: b.tid,
                state: Some(b.state),
                kernel: half(&b.kernel, "[kernel stack lost]"),
                user: half(&b.user, "[user stack lost]"),
                count: b.count,
                weight: b.total_ns,
                ongoing: false,
                waker: None,
                times: &[],
            });
        }
        profile.unit = WeightUnit::Nanoseconds;
        profile.lost = self.counts()?.stacks_lost();
        recorder.finish(profile);
        for s in &mut profile.stacks {
            trim_machinery(&mut s.frames);
        }
        Ok(())
    }

    /// The blocks in progress, by thread.
    fn starts(&self) -> anyhow::Result<HashMap<u32, Start>> {
        let starts: BpfHashMap<_, u32, Start> =
            BpfHashMap::try_from(self.ebpf.map("starts").context("no starts map")?)?;
        let mut all = HashMap::new();
        for entry in starts.iter() {
            let (tid, s) = entry.context("reading the blocks in progress")?;
            all.insert(tid, s);
        }
        Ok(all)
    }

    /// The blocked time summed so far, keyed by the thread's block and its
    /// waker (none: from `blocked`).
    fn totals(&self) -> anyhow::Result<HashMap<TableKey, Value>> {
        let blocked: BpfHashMap<_, Key, Value> =
            BpfHashMap::try_from(self.ebpf.map("blocked").context("no blocked map")?)?;
        let offwake: BpfHashMap<_, WakeKey, Value> =
            BpfHashMap::try_from(self.ebpf.map("offwake").context("no offwake map")?)?;
        let mut totals: HashMap<TableKey, Value> = HashMap::new();
        let mut add = |k, v: Value| {
            let t = totals.entry(k).or_default();
            t.total_ns += v.total_ns;
            t.count += v.count;
        };
        for entry in blocked.iter() {
            let (k, v) = entry.context("reading the off-CPU table")?;
            add((k, None), v);
        }
        for entry in offwake.iter() {
            let (k, v) = entry.context("reading the off-wake table")?;
            add((k.block, Some(k.waker)), v);
        }
        Ok(totals)
    }
}

/// How often a per-thread trace drains its ring of block ends.
const READ_EVERY_NS: u64 = 100_000_000;

/// The ring of block ends, per thread: 4 MiB, 58,000 ends of 72 bytes
/// (and an 8-byte header): room for 580,000 blocks a second between drains
/// 100 ms apart. Its size must be a power of two pages.
const ENDS_BYTES: u32 = 4 << 20;

/// A kernel `comm`: up to its first NUL.
fn comm_string(comm: &[u8]) -> String {
    let end = comm.iter().position(|&c| c == 0).unwrap_or(comm.len());
    String::from_utf8_lossy(&comm[..end]).into_owned()
}

/// The BPF tier at work: the programs, the sideband and what it learnt.
pub struct Tracer {
    bpf: OffcpuBpf,
    sideband: Sideband,
    min_block_ns: u64,
    /// Per thread: when the ring of block ends was last drained, and the
    /// ends taken from it, by block.
    last_read_ns: u64,
    times: HashMap<TableKey, Vec<(u64, u64)>>,
}

impl Tracer {
    /// Attach the BPF programs and open the sideband. `options.tgids` that
    /// exist now have their mappings and thread names read at once.
    pub fn start(options: &Options) -> anyhow::Result<Tracer> {
        let bpf = OffcpuBpf::start(options)?;
        let sideband = Sideband::open(
            &options.tgids,
            options.follow,
            RecordOptions {
                per_thread: options.per_thread,
                ..Default::default()
            },
        )?;
        Ok(Tracer {
            bpf,
            sideband,
            min_block_ns: options.min_block_ns,
            last_read_ns: crate::sys::monotonic_ns(),
            times: HashMap::new(),
        })
    }

    /// Per thread: take the block ends the ring holds.
    fn read_times(&mut self, now_ns: u64) {
        self.last_read_ns = now_ns;
        self.bpf.drain_ends(&mut self.times);
    }

    /// How the switch tracepoint was attached.
    pub fn attach(&self) -> Attach {
        self.bpf.attach
    }

    /// Watch one more process: a `-- CMD` child, held before its exec,
    /// named `comm` until its exec renames it.
    pub fn watch(&mut self, tgid: u32, comm: &str) -> anyhow::Result<()> {
        self.bpf.watch(tgid)?;
        self.sideband.watch(tgid, comm);
        Ok(())
    }

    /// Wait up to `timeout` for sideband records, and take them.
    pub fn poll(&mut self, timeout: Duration) -> anyhow::Result<()> {
        self.sideband.poll(timeout)?;
        let now = crate::sys::monotonic_ns();
        if now - self.last_read_ns >= READ_EVERY_NS {
            self.read_times(now);
        }
        Ok(())
    }

    /// Stop recording, read the kernel's tables once and symbolize: the
    /// profile's stacks (weights in ns blocked), and the counters. Every
    /// program is detached before the tables are read.
    pub fn finish(mut self, profile: &mut Profile) -> anyhow::Result<BlockCounts> {
        let end_ns = self.bpf.stop()?;
        self.sideband.stop()?;
        let mut counts = self.bpf.counts()?;
        self.read_times(end_ns);
        let (blocks, in_progress) = self
            .bpf
            .collect(end_ns, self.min_block_ns, &mut self.times)?;
        counts.in_progress = in_progress;
        for b in &blocks {
            self.sideband.recorder().add_stack(CountedStack {
                pid: b.tgid,
                tid: b.tid,
                state: Some(b.state),
                kernel: half(
                    &b.kernel,
                    if b.asleep_before {
                        "[asleep since before tracing began]"
                    } else {
                        "[kernel stack lost]"
                    },
                ),
                user: half(&b.user, "[user stack lost]"),
                count: b.count,
                weight: b.total_ns,
                ongoing: b.ongoing,
                waker: b.waker.as_ref().map(|w| WakerStack {
                    pid: w.tgid,
                    tid: w.tid,
                    comm: &w.comm,
                    kernel: half(&w.kernel, "[kernel stack lost]"),
                    user: half(&w.user, "[user stack lost]"),
                }),
                times: &b.times,
            });
        }
        profile.unit = WeightUnit::Nanoseconds;
        profile.lost = counts.stacks_lost();
        self.sideband.into_recorder().finish(profile);
        for s in &mut profile.stacks {
            trim_machinery(&mut s.frames);
        }
        for s in &mut profile.stacks {
            if let Some(w) = &mut s.waker {
                trim_waker(w);
            }
        }
        Ok(counts)
    }
}

impl ReportSource<Profile, Found> for Tracer {
    fn tier(&self) -> Tier {
        Tier::Bpf
    }

    fn watch(&mut self, tgid: u32, comm: &str) -> anyhow::Result<()> {
        Tracer::watch(self, tgid, comm)
    }

    fn poll(&mut self, timeout: Duration) -> anyhow::Result<()> {
        Tracer::poll(self, timeout)
    }

    fn finish(self: Box<Self>, profile: &mut Profile) -> anyhow::Result<Found> {
        let attach = self.attach().name().to_string();
        let counts = Tracer::finish(*self, profile)?;
        Ok(Found {
            counts,
            waits: None,
            collection: Collection::Bpf { attach },
        })
    }
}

/// The block of key `k` with totals `v`, its stacks resolved: not woken,
/// not going on, without times (the caller adds what it knows).
fn block(k: &Key, v: &Value, resolve: &mut impl FnMut(i32, bool) -> Captured) -> Block {
    Block {
        tgid: k.tgid,
        tid: k.pid,
        state: STATE_CLASSES
            .get(k.state as usize)
            .copied()
            .unwrap_or(OffState::Other),
        kernel: resolve(k.kstack, false),
        // A thread asleep since before tracing began has no stacks.
        user: match k.ustack {
            ASLEEP_BEFORE => Captured::Absent,
            id => resolve(id, true),
        },
        asleep_before: k.kstack == ASLEEP_BEFORE,
        total_ns: v.total_ns,
        count: v.count,
        waker: None,
        ongoing: false,
        times: Vec::new(),
    }
}
