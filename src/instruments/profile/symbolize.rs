//! From perf records (or stacks captured by BPF) to symbolized stacks.
//!
//! `Recorder` takes the records of a sampling session as they are drained,
//! and stacks counted elsewhere (`add_stack`: kdiag offcpu's BPF stack map):
//! it merges identical raw stacks and keeps, per process, the executable
//! mappings it saw (MMAP2 records, inherited on FORK) or read from
//! /proc/PID/maps the first time the process showed up. `finish` then names
//! every frame: kernel frames from /proc/kallsyms, user frames from the
//! mapped file's ELF symbols or DWARF at its file offset (blazesym). Because
//! user frames are resolved by (file, offset), a `-- CMD` that has already
//! exited still symbolizes: its mappings came in MMAP2 records while it ran.
//!
//! With `--call-graph dwarf|auto` the recorder hands each sample's stack
//! copy to the unwind stage (`instruments::profile::unwind`) as it comes in,
//! with the process's mappings known so far, and keeps only the addresses.
//! Code in anonymous memory (JIT, interpreters) is named from the process's
//! `/tmp/perf-PID.map` (`instruments::profile::perf_map`).
//!
//! A frame that cannot be named shows its module and file offset
//! (`libc.so.6+0x2a1b0`) or `[unknown]`, and the reason is counted.

use std::collections::HashMap;

use std::os::unix::fs::MetadataExt;

use crate::instruments::profile::names::{Maps, Names, Place};
use crate::instruments::profile::unwind::{CallGraph, Unwinder};
use crate::model::profile::{Frame, OffState, Profile, Stack, ThreadId, Waker};
use crate::sys::perf::{Record, Space};
use crate::sys::procfs::maps::{Mapping, parse_maps};

/// Which frames to keep and which samples count.
#[derive(Debug, Clone, Copy, Default)]
pub struct RecordOptions {
    /// Keep samples of the idle task (pid 0).
    pub include_idle: bool,
    pub user_only: bool,
    pub kernel_only: bool,
    /// How user stacks are walked (fp: the kernel's callchain as is).
    pub call_graph: CallGraph,
    /// Keep each thread's stacks apart (`Profile::threads`), with when each
    /// weight was seen (`Profile::times`).
    pub per_thread: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RawKey {
    pid: u32,
    tid: u32,
    /// Innermost first: the kernel frames, then the user frames.
    ips: Box<[u64]>,
    kernel: u16,
    /// Off-CPU stacks: the state the thread blocked in.
    state: Option<OffState>,
    /// Placeholder frames for halves the collector could not capture.
    kernel_lost: Option<&'static str>,
    user_lost: Option<&'static str>,
    /// Off-CPU stacks with wakers: who woke the thread.
    waker: Option<Box<RawWaker>>,
    ongoing: bool,
}

/// A waker's stack as captured: `RawKey`'s fields for another thread.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RawWaker {
    pid: u32,
    tid: u32,
    comm: String,
    ips: Box<[u64]>,
    kernel: u16,
    kernel_lost: Option<&'static str>,
    user_lost: Option<&'static str>,
}

/// One half (kernel or user) of a stack captured outside perf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Half<'a> {
    /// Addresses, innermost first.
    Ips(&'a [u64]),
    /// Not captured: shown as this one placeholder frame (`[stack lost]`),
    /// never as a made-up stack.
    Lost(&'static str),
}

/// A stack counted outside perf (a BPF stack map), with its weight.
#[derive(Debug, Clone, Copy)]
pub struct CountedStack<'a> {
    pub pid: u32,
    pub tid: u32,
    pub state: Option<OffState>,
    pub kernel: Half<'a>,
    pub user: Half<'a>,
    /// Events (samples, blocks) on this stack.
    pub count: u64,
    /// Their total weight (sample periods, nanoseconds blocked).
    pub weight: u64,
    /// Off-CPU: the thread that woke this one, when known.
    pub waker: Option<WakerStack<'a>>,
    /// Off-CPU with wakers: blocks still going on when tracing ended.
    pub ongoing: bool,
    /// When the weight was seen: (CLOCK_MONOTONIC ns it ended, weight).
    pub times: &'a [(u64, u64)],
}

/// The thread that woke a sleeper, with its stack (a BPF stack map's).
#[derive(Debug, Clone, Copy)]
pub struct WakerStack<'a> {
    pub pid: u32,
    pub tid: u32,
    pub comm: &'a str,
    pub kernel: Half<'a>,
    pub user: Half<'a>,
}

#[derive(Debug, Clone, Default)]
struct RawCount {
    samples: u64,
    weight: u64,
    /// Per thread: (CLOCK_MONOTONIC ns, weight) as seen.
    times: Vec<(u64, u64)>,
}

/// Collects samples and task events during a recording.
#[derive(Default)]
pub struct Recorder {
    opts: RecordOptions,
    /// The unwind stage (dwarf and auto call graphs).
    unwinder: Option<Unwinder>,
    maps: HashMap<u32, Maps>,
    comms: HashMap<u32, String>,
    stacks: HashMap<RawKey, RawCount>,
    samples: u64,
    idle: u64,
}

/// User addresses start below this; kernel text lives above (x86-64, arm64).
const KERNEL_START: u64 = 0xffff_0000_0000_0000;

impl Recorder {
    pub fn new(opts: RecordOptions) -> Self {
        let unwinder = (opts.call_graph.copies_stack() && !opts.kernel_only)
            .then(|| Unwinder::new(opts.call_graph, crate::sys::perf::max_stack() as usize));
        Recorder {
            opts,
            unwinder,
            ..Default::default()
        }
    }

    /// Name a thread in advance (the command of `-- CMD`, whose first COMM
    /// happens before sampling is enabled).
    pub fn name(&mut self, tid: u32, comm: &str) {
        self.comms.insert(tid, comm.to_string());
    }

    /// Read a process's mappings now, while it lives (`-p PID`).
    pub fn capture(&mut self, pid: u32) {
        self.ensure(pid);
    }

    /// Samples kept so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    fn ensure(&mut self, pid: u32) -> &mut Maps {
        self.maps.entry(pid).or_insert_with(|| {
            let uid = std::fs::metadata(format!("/proc/{pid}"))
                .ok()
                .map(|m| m.uid());
            match std::fs::read_to_string(format!("/proc/{pid}/maps")) {
                Ok(text) => Maps {
                    list: parse_maps(&text),
                    unreadable: false,
                    uid,
                },
                Err(_) => Maps {
                    list: Vec::new(),
                    unreadable: true,
                    uid,
                },
            }
        })
    }

    fn ensure_comm(&mut self, pid: u32, tid: u32) {
        if pid == 0 {
            return;
        }
        if !self.comms.contains_key(&tid) {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                .map(|c| c.trim_end().to_string())
                .or_else(|_| self.comms.get(&pid).cloned().ok_or(()));
            if let Ok(c) = comm {
                self.comms.insert(tid, c);
            }
        }
    }

    /// Take one drained record.
    pub fn record(&mut self, rec: &Record<'_>) {
        match *rec {
            Record::Sample(ref s) => {
                if s.pid == 0 && !self.opts.include_idle {
                    self.idle += 1;
                    return;
                }
                let mut ips = Vec::with_capacity(s.callchain.len());
                let mut kernel = 0u16;
                for (space, ip) in s.callchain.frames() {
                    let keep = match space {
                        Space::Kernel => !self.opts.user_only,
                        Space::User => !self.opts.kernel_only,
                    };
                    if keep {
                        ips.push(ip);
                        kernel += (space == Space::Kernel) as u16;
                    }
                }
                if s.callchain.is_empty() {
                    ips.push(s.ip);
                    kernel = (s.ip >= KERNEL_START) as u16;
                }
                if s.pid != 0 {
                    self.ensure(s.pid);
                    self.ensure_comm(s.pid, s.tid);
                }
                // The unwind stage replaces the frame-pointer user frames.
                if let (Some(unwinder), Some(maps)) = (&mut self.unwinder, self.maps.get(&s.pid)) {
                    let kernel = kernel as usize;
                    if let Some(user) = unwinder.user_frames(s, &maps.list, &ips[kernel..]) {
                        ips.truncate(kernel);
                        ips.extend(user);
                    }
                }
                if ips.is_empty() {
                    return;
                }
                let key = RawKey {
                    pid: s.pid,
                    tid: s.tid,
                    ips: ips.into_boxed_slice(),
                    kernel,
                    state: None,
                    kernel_lost: None,
                    user_lost: None,
                    waker: None,
                    ongoing: false,
                };
                self.add(key, 1, s.period, &[(s.time, s.period)]);
            }
            Record::Comm { tid, comm, .. } => {
                self.comms.insert(tid, comm.to_string());
            }
            Record::Mmap2 {
                pid,
                addr,
                len,
                pgoff,
                filename,
                ..
            } => {
                let maps = self.ensure(pid);
                maps.unreadable = false;
                maps.list.push(Mapping {
                    start: addr,
                    end: addr + len,
                    pgoff,
                    path: filename.to_string(),
                });
            }
            Record::Fork { pid, ppid, tid, .. } if pid != ppid => {
                // A new process starts with its parent's mappings.
                let parent = self.ensure(ppid).clone();
                let child = self.maps.entry(pid).or_default();
                let mine = std::mem::take(&mut child.list);
                child.list = parent.list;
                child.list.extend(mine);
                child.unreadable = false;
                child.uid = child.uid.or(parent.uid);
                if let Some(c) = self.comms.get(&ppid).cloned() {
                    self.comms.entry(tid).or_insert(c);
                }
            }
            _ => {}
        }
    }

    /// Take a stack counted elsewhere (a BPF stack map), `count` events
    /// weighing `weight` in all.
    pub fn add_stack(&mut self, stack: CountedStack<'_>) {
        let ips = |h: Half<'_>| match h {
            Half::Ips(ips) => ips.to_vec(),
            Half::Lost(_) => Vec::new(),
        };
        let lost = |h: Half<'_>| match h {
            Half::Ips(_) => None,
            Half::Lost(name) => Some(name),
        };
        let both = |k: Half<'_>, u: Half<'_>| {
            let mut all = ips(k);
            let kernel = all.len() as u16;
            all.extend(ips(u));
            (all.into_boxed_slice(), kernel)
        };
        let (all, kernel) = both(stack.kernel, stack.user);
        let waker = stack.waker.map(|w| {
            if w.pid != 0 {
                self.ensure(w.pid);
            }
            let (ips, kernel) = both(w.kernel, w.user);
            Box::new(RawWaker {
                pid: w.pid,
                tid: w.tid,
                comm: w.comm.to_string(),
                ips,
                kernel,
                kernel_lost: lost(w.kernel),
                user_lost: lost(w.user),
            })
        });
        let key = RawKey {
            pid: stack.pid,
            tid: stack.tid,
            ips: all,
            kernel,
            state: stack.state,
            kernel_lost: lost(stack.kernel),
            user_lost: lost(stack.user),
            waker,
            ongoing: stack.ongoing,
        };
        self.add(key, stack.count, stack.weight, stack.times);
    }

    fn add(&mut self, key: RawKey, count: u64, weight: u64, times: &[(u64, u64)]) {
        self.samples += count;
        if key.pid != 0 {
            self.ensure(key.pid);
            self.ensure_comm(key.pid, key.tid);
        }
        let per_thread = self.opts.per_thread;
        let c = self.stacks.entry(key).or_default();
        c.samples += count;
        c.weight += weight;
        if per_thread {
            c.times.extend_from_slice(times);
        }
    }

    /// Name every frame and build the profile's stacks. `profile` gets the
    /// stacks, sample counts and unknown-frame reasons.
    pub fn finish(self, profile: &mut Profile) {
        profile.unwind = self.unwinder.as_ref().map(Unwinder::stats);
        let mut names = Names::new(&self.maps);
        // Resolve in batches: every kernel address at once, each file once.
        let mut kernel_ips = Vec::new();
        let mut wanted: HashMap<String, Vec<u64>> = HashMap::new();
        let halves = self.stacks.keys().flat_map(|k| {
            let waker = k.waker.as_ref().map(|w| (w.pid, &w.ips, w.kernel));
            [(k.pid, &k.ips, k.kernel)].into_iter().chain(waker)
        });
        for (pid, ips, kernel) in halves {
            let (kernel, user) = ips.split_at(kernel as usize);
            kernel_ips.extend(kernel.iter().enumerate().map(|(i, &ip)| adjust(ip, i)));
            for (i, &ip) in user.iter().enumerate() {
                if let Place::File(path, off) = names.place(pid, adjust(ip, i)) {
                    wanted.entry(path.to_string()).or_default().push(off);
                }
            }
        }
        names.resolve_kernel(kernel_ips);
        for (path, offsets) in wanted {
            names.resolve_file(&path, offsets);
        }

        // Per thread, the thread is part of the key; else stacks merge by name.
        type MergeKey = (
            Option<ThreadId>,
            String,
            Option<OffState>,
            Vec<Frame>,
            Option<Waker>,
            bool,
        );
        let mut merged: HashMap<MergeKey, (Stack, Vec<(u64, u64)>)> = HashMap::new();
        for (key, count) in &self.stacks {
            let user = &key.ips[key.kernel as usize..];
            let lost = (key.kernel_lost, key.user_lost);
            let frames = named(&mut names, key.pid, &key.ips, key.kernel, lost);
            let waker = key.waker.as_ref().map(|w| Waker {
                pid: w.pid,
                tid: w.tid,
                comm: w.comm.clone(),
                frames: named(
                    &mut names,
                    w.pid,
                    &w.ips,
                    w.kernel,
                    (w.kernel_lost, w.user_lost),
                ),
            });
            // Another process's name: never a raw escape in any format.
            let comm = match self.comms.get(&key.tid).or(self.comms.get(&key.pid)) {
                Some(c) => crate::analysis::ps::printable(c),
                None if key.pid == 0 => "swapper".into(),
                None => format!("[pid {}]", key.pid),
            };
            let thread = self.opts.per_thread.then_some(ThreadId {
                pid: key.pid,
                tid: key.tid,
            });
            let (s, times) = merged
                .entry((
                    thread,
                    comm.clone(),
                    key.state,
                    frames.clone(),
                    waker.clone(),
                    key.ongoing,
                ))
                .or_insert_with(|| {
                    let s = Stack {
                        comm,
                        frames,
                        waker,
                        ongoing: key.ongoing,
                        samples: 0,
                        weight: 0,
                        user_depth: 0,
                        state: key.state,
                    };
                    (s, Vec::new())
                });
            times.extend_from_slice(&count.times);
            s.samples += count.samples;
            s.weight += count.weight;
            s.user_depth = s.user_depth.max(user.len() as u16);
        }
        let mut stacks: Vec<_> = merged
            .into_iter()
            .map(|(k, (s, mut times))| {
                times.sort_unstable();
                (k.0, s, times)
            })
            .collect();
        stacks.sort_by(|(ta, a, _), (tb, b, _)| {
            b.weight
                .cmp(&a.weight)
                .then_with(|| a.frames.cmp(&b.frames))
                .then_with(|| a.waker.cmp(&b.waker))
                .then_with(|| ta.cmp(tb))
        });
        profile.threads = stacks.iter().filter_map(|(t, ..)| *t).collect();
        if self.opts.per_thread {
            profile.times = stacks.iter_mut().map(|(.., t)| std::mem::take(t)).collect();
        }
        profile.stacks = stacks.into_iter().map(|(_, s, _)| s).collect();
        profile.samples = self.samples;
        profile.idle_samples = self.idle;
        profile.modules = names.modules();
        profile.unknown_frames = names.reasons.into_iter().collect();
    }
}

/// A captured stack's frames, named, outermost first: the user frames
/// reversed, then the kernel frames reversed (`ips` is innermost first, its
/// first `kernel` addresses the kernel's). `lost`: the placeholder frames
/// of the (kernel, user) halves that were not captured.
fn named(
    names: &mut Names<'_>,
    pid: u32,
    ips: &[u64],
    kernel: u16,
    lost: (Option<&'static str>, Option<&'static str>),
) -> Vec<Frame> {
    let (kernel, user) = ips.split_at(kernel as usize);
    let mut frames = Vec::with_capacity(ips.len() + 2);
    frames.extend(lost.1.map(Frame::user));
    for (i, &ip) in user.iter().enumerate().rev() {
        frames.push(names.user(pid, adjust(ip, i)));
    }
    frames.extend(lost.0.map(Frame::kernel));
    for (i, &ip) in kernel.iter().enumerate().rev() {
        frames.push(Frame::kernel(names.kernel(adjust(ip, i))));
    }
    frames
}

/// Return addresses point after the call: step back into the call
/// instruction so the caller is named, not whatever follows it. The
/// innermost frame (index 0 of its half) is where the CPU was: keep it.
fn adjust(ip: u64, index: usize) -> u64 {
    if index == 0 { ip } else { ip.saturating_sub(1) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_executable_maps_only() {
        let text = "\
5581d0a00000-5581d0a21000 r--p 00000000 fd:01 123  /usr/bin/foo bar
5581d0a21000-5581d0a80000 r-xp 00021000 fd:01 123  /usr/bin/foo bar
7ffd1c5f0000-7ffd1c5f2000 r-xp 00000000 00:00 0                          [vdso]
7f0000000000-7f0000001000 rwxp 00000000 00:00 0
";
        let maps = parse_maps(text);
        assert_eq!(maps.len(), 3);
        assert_eq!(
            maps[0],
            Mapping {
                start: 0x5581d0a21000,
                end: 0x5581d0a80000,
                pgoff: 0x21000,
                path: "/usr/bin/foo bar".into()
            }
        );
        assert_eq!(maps[1].path, "[vdso]");
        assert_eq!(maps[2].path, "");
    }

    #[test]
    fn later_mappings_win() {
        let mut m = Maps::default();
        m.list.push(Mapping {
            start: 0x1000,
            end: 0x3000,
            pgoff: 0,
            path: "/old".into(),
        });
        m.list.push(Mapping {
            start: 0x2000,
            end: 0x4000,
            pgoff: 0,
            path: "/new".into(),
        });
        assert_eq!(m.find(0x1800).unwrap().path, "/old");
        assert_eq!(m.find(0x2800).unwrap().path, "/new");
        assert!(m.find(0x4000).is_none());
    }

    #[test]
    fn names_our_own_functions_by_file_offset() {
        // Symbolize an address of this test binary through /proc/self/maps,
        // exactly as a profiled process's frames are.
        let ip = names_our_own_functions_by_file_offset as fn() as usize as u64;
        let pid = std::process::id();
        let mut maps = HashMap::new();
        maps.insert(
            pid,
            Maps {
                list: parse_maps(&std::fs::read_to_string("/proc/self/maps").unwrap()),
                unreadable: false,
                uid: None,
            },
        );
        let mut names = Names::new(&maps);
        let Place::File(path, off) = names.place(pid, ip) else {
            panic!("our own code is not in a file mapping")
        };
        let path = path.to_string();
        names.resolve_file(&path, vec![off, 1]);
        let name = names.user(pid, ip).name;
        assert!(
            name.ends_with("names_our_own_functions_by_file_offset"),
            "{name}"
        );
        assert_eq!(names.user(pid, 8).name, "[unknown]");
        assert_eq!(names.user(999_999_999, 8).name, "[unknown]");
        assert_eq!(names.reasons.len(), 2, "{:?}", names.reasons);
    }

    /// A raw SAMPLE body as the kernel writes it (IP, TID, TIME, CPU,
    /// PERIOD, CALLCHAIN), decoded by the engine.
    fn sample_body(pid: u32, callchain: &[u64]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(callchain[1].to_ne_bytes());
        b.extend(pid.to_ne_bytes());
        b.extend(pid.to_ne_bytes());
        b.extend(1u64.to_ne_bytes());
        b.extend(0u64.to_ne_bytes()); // cpu, res
        b.extend(10_000_000u64.to_ne_bytes());
        b.extend((callchain.len() as u64).to_ne_bytes());
        for ip in callchain {
            b.extend(ip.to_ne_bytes());
        }
        b
    }

    #[test]
    fn a_process_gone_before_the_end_symbolizes_from_mmap2() {
        use perf_event_open_sys::bindings as pe;
        // A pid that does not exist (it "exited"), mapped like this test binary.
        let ip = a_process_gone_before_the_end_symbolizes_from_mmap2 as fn() as usize as u64;
        let own = parse_maps(&std::fs::read_to_string("/proc/self/maps").unwrap());
        let m = own.iter().find(|m| m.start <= ip && ip < m.end).unwrap();
        let gone = 999_999_999;
        let mut rec = Recorder::new(RecordOptions::default());
        rec.record(&Record::Comm {
            pid: gone,
            tid: gone,
            comm: "gone",
            exec: true,
        });
        rec.record(&Record::Mmap2 {
            pid: gone,
            tid: gone,
            addr: m.start,
            len: m.end - m.start,
            pgoff: m.pgoff,
            filename: &m.path,
        });
        let sample_type = (pe::PERF_SAMPLE_IP
            | pe::PERF_SAMPLE_TID
            | pe::PERF_SAMPLE_TIME
            | pe::PERF_SAMPLE_CPU
            | pe::PERF_SAMPLE_PERIOD
            | pe::PERF_SAMPLE_CALLCHAIN) as u64;
        let body = sample_body(gone, &[pe::PERF_CONTEXT_USER, ip, m.end + 0x1000_0000]);
        let sample =
            crate::sys::perf::decode(pe::PERF_RECORD_SAMPLE, 0, &body, sample_type).unwrap();
        rec.record(&sample);
        let mut profile = Profile::default();
        rec.finish(&mut profile);
        assert_eq!(profile.samples, 1);
        let stack = &profile.stacks[0];
        assert_eq!(stack.comm, "gone");
        assert_eq!(stack.user_depth, 2);
        // Outermost first: the bogus caller, then our function.
        assert_eq!(stack.frames[0].name, "[unknown]");
        assert!(
            stack.frames[1]
                .name
                .ends_with("a_process_gone_before_the_end_symbolizes_from_mmap2"),
            "{:?}",
            stack.frames
        );
        assert_eq!(profile.unknown_frames.len(), 1);
    }

    #[test]
    fn names_kernel_entry() {
        if !crate::testing::require_root("names_kernel_entry") {
            return;
        }
        let line = std::fs::read_to_string("/proc/kallsyms")
            .unwrap()
            .lines()
            .find(|l| l.ends_with(" do_syscall_64"))
            .map(str::to_string)
            .expect("do_syscall_64 in kallsyms");
        let addr = u64::from_str_radix(line.split(' ').next().unwrap(), 16).unwrap();
        let maps = HashMap::new();
        let mut names = Names::new(&maps);
        names.resolve_kernel(vec![addr + 4, 0xffff_8000_0000_1000]);
        assert_eq!(names.kernel(addr + 4), "do_syscall_64");
        assert_eq!(names.kernel(0xffff_8000_0000_1000), "[unknown]");
    }
}
