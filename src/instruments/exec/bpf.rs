//! The BPF tier of exec tracing: loads exec.bpf.o, attaches its programs and
//! turns ring-buffer records into `TraceEvent`s.

use std::os::fd::AsRawFd;
use std::time::Duration;

use anyhow::Context;
use aya::maps::{MapData, PerCpuArray, RingBuf, StackTraceMap};
use aya::programs::{BtfTracePoint, TracePoint};

use super::source::Filter;
use crate::instruments::{Source, Tier};
use crate::model::exec::{
    ExecEvent, Exit, Fork, PrepareExec, ProcessEnd, SignalEvent, TraceEvent, errno_name,
    si_code_name, signal_name,
};
use crate::sys::kallsyms::KernelSymbols;

// Mirrors of the C records (exec.bpf.c); every record starts with `kind`.
const EXEC: u32 = 1;
const PREPARE: u32 = 2;
const SIGNAL: u32 = 3;
const EXIT: u32 = 4;
const FORK: u32 = 5;
const MAX_ARGS: usize = 8;

#[repr(C)]
#[derive(Clone, Copy)]
struct RawExec {
    kind: u32,
    pid: u32,
    tid: u32,
    ppid: u32,
    uid: u32,
    argc: u32,
    truncated: u32,
    at: u32,
    ret: i64,
    ts: u64,
    comm: [u8; 16],
    filename: [u8; 256],
    args: [[u8; 96]; MAX_ARGS],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct RawPrepare {
    kind: u32,
    pid: u32,
    ts: u64,
    filename: [u8; 256],
    interp: [u8; 128],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct RawSignal {
    kind: u32,
    sig: i32,
    code: i32,
    err: i32,
    pid: u32,
    tid: u32,
    sender_pid: u32,
    group: i32,
    result: i32,
    stack_id: i32,
    addr: u64,
    ts: u64,
    comm: [u8; 16],
    sender_comm: [u8; 16],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct RawExit {
    kind: u32,
    pid: u32,
    ppid: u32,
    exit_code: i32,
    ts: u64,
    comm: [u8; 16],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct RawFork {
    kind: u32,
    parent: u32,
    child: u32,
    pad: u32,
    ts: u64,
}

/// Copy a record of type T out of the ring's bytes, if it is long enough.
fn read<T: Copy>(bytes: &[u8]) -> Option<T> {
    (bytes.len() >= std::mem::size_of::<T>())
        // SAFETY: the length is checked, T is plain old data (repr(C) of
        // integers and byte arrays) and read_unaligned has no alignment needs.
        .then(|| unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

fn text(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// A loaded and attached exec trace. Dropping it detaches the programs.
pub struct ExecBpf {
    events: RingBuf<MapData>,
    stacks: Option<StackTraceMap<MapData>>,
    drops: PerCpuArray<MapData, u64>,
    ksyms: Option<KernelSymbols>,
    notes: Vec<String>,
    // Owns the programs and their links; dropped last.
    _ebpf: crate::sys::bpf::Loaded,
}

impl ExecBpf {
    pub fn open(filter: Filter) -> anyhow::Result<ExecBpf> {
        let pid = filter.pid.unwrap_or(0);
        let follow = filter.follow_children as u8;
        let signals = filter.signals as u8;
        let uid = filter.scope.uid().unwrap_or(u32::MAX);
        let mut ebpf = crate::sys::bpf::load_with(
            crate::sys::bpf::objects::EXEC,
            "exec tracing (BPF)",
            &[
                ("targ_pid", &pid.to_ne_bytes()),
                ("follow_children", &[follow]),
                ("want_signals", &[signals]),
                ("targ_uid", &uid.to_ne_bytes()),
            ],
            &[],
        )?;
        let tracefs = crate::sys::tracefs::Tracefs::open()?;
        let mut notes = Vec::new();
        for (prog, event) in [
            ("enter_execve", "sys_enter_execve"),
            ("exit_execve", "sys_exit_execve"),
            ("enter_execveat", "sys_enter_execveat"),
            ("exit_execveat", "sys_exit_execveat"),
        ] {
            let tp: &mut TracePoint = ebpf
                .program_mut(prog)
                .context("exec.bpf.o lacks a program")?
                .try_into()?;
            tp.load()
                .with_context(|| format!("loading the BPF program for syscalls:{event}"))?;
            tp.attach("syscalls", event)
                .with_context(|| format!("attaching to syscalls:{event}"))?;
        }
        if filter.signals {
            let btf = crate::sys::bpf::kernel_btf().context("reading the kernel's BTF")?;
            let mut btf_progs = vec![("signal_generate", "signal_generate")];
            if filter.follow_children {
                btf_progs.push(("process_fork", "sched_process_fork"));
            }
            if tracefs.has_event("sched", "sched_prepare_exec") {
                btf_progs.push(("prepare_exec", "sched_prepare_exec"));
            } else {
                notes.push(
                    "this kernel has no sched_prepare_exec (added in 6.10): the point of no \
                     return is inferred from the SIGSEGV that follows"
                        .into(),
                );
            }
            for (prog, event) in btf_progs {
                let tp: &mut BtfTracePoint = ebpf
                    .program_mut(prog)
                    .context("exec.bpf.o lacks a program")?
                    .try_into()?;
                tp.load(event, btf)
                    .with_context(|| format!("loading the tp_btf program for {event}"))?;
                tp.attach()
                    .with_context(|| format!("attaching to tp_btf/{event}"))?;
            }
            let tp: &mut TracePoint = ebpf
                .program_mut("process_exit")
                .context("exec.bpf.o lacks process_exit")?
                .try_into()?;
            tp.load()?;
            tp.attach("sched", "sched_process_exit")
                .context("attaching to sched:sched_process_exit")?;
        }
        let events = RingBuf::try_from(ebpf.take_map("events").context("no events map")?)?;
        let stacks = ebpf
            .take_map("stacks")
            .map(StackTraceMap::try_from)
            .transpose()?;
        let drops = PerCpuArray::try_from(ebpf.take_map("drops").context("no drops map")?)?;
        Ok(ExecBpf {
            events,
            stacks,
            drops,
            ksyms: None,
            notes,
            _ebpf: ebpf,
        })
    }

    fn decode(&mut self, bytes: &[u8]) -> Option<TraceEvent> {
        let kind = u32::from_ne_bytes(bytes.get(..4)?.try_into().ok()?);
        Some(match kind {
            EXEC => {
                let r: RawExec = read(bytes)?;
                let argc = (r.argc as usize).min(MAX_ARGS);
                TraceEvent::Exec(ExecEvent {
                    time_ns: r.ts,
                    pid: r.pid,
                    tid: r.tid,
                    ppid: r.ppid,
                    uid: r.uid,
                    comm: text(&r.comm),
                    syscall: if r.at != 0 { "execveat" } else { "execve" },
                    filename: Some(text(&r.filename)),
                    argv: r.args[..argc].iter().map(|a| text(a)).collect(),
                    argv_truncated: r.truncated != 0,
                    ret: r.ret,
                    errno: (r.ret < 0).then(|| errno_name(-r.ret as i32)).flatten(),
                })
            }
            PREPARE => {
                let r: RawPrepare = read(bytes)?;
                TraceEvent::PrepareExec(PrepareExec {
                    time_ns: r.ts,
                    pid: r.pid,
                    filename: text(&r.filename),
                    interp: text(&r.interp),
                })
            }
            SIGNAL => {
                let r: RawSignal = read(bytes)?;
                let kernel_stack = self.stack(r.stack_id);
                TraceEvent::Signal(SignalEvent {
                    time_ns: r.ts,
                    sig: r.sig,
                    sig_name: signal_name(r.sig),
                    code: r.code,
                    code_name: si_code_name(r.sig, r.code),
                    errno: r.err,
                    pid: r.pid,
                    tid: r.tid,
                    comm: text(&r.comm),
                    sender_pid: r.sender_pid,
                    sender_comm: text(&r.sender_comm),
                    addr: matches!(r.sig, 4 | 5 | 7 | 8 | 11)
                        .then_some(r.addr)
                        .filter(|_| r.code > 0 && r.code != 0x80),
                    kernel_stack,
                })
            }
            EXIT => {
                let r: RawExit = read(bytes)?;
                TraceEvent::Exit(ProcessEnd {
                    time_ns: r.ts,
                    pid: r.pid,
                    comm: text(&r.comm),
                    exit: Exit::from_status(r.exit_code),
                })
            }
            FORK => {
                let r: RawFork = read(bytes)?;
                TraceEvent::Fork(Fork {
                    time_ns: r.ts,
                    parent: r.parent,
                    child: r.child,
                })
            }
            _ => return None,
        })
    }

    fn stack(&mut self, id: i32) -> Vec<crate::model::exec::Frame> {
        let (Ok(id), Some(stacks)) = (u32::try_from(id), &self.stacks) else {
            return vec![];
        };
        let Ok(trace) = stacks.get(&id, 0) else {
            return vec![];
        };
        let ksyms = self.ksyms.get_or_insert_with(KernelSymbols::load);
        ksyms.stack(trace.frames().iter().map(|f| f.ip))
    }
}

impl Source for ExecBpf {
    type Event = TraceEvent;

    fn tier(&self) -> Tier {
        Tier::Bpf
    }

    fn poll(&mut self, timeout: Duration, out: &mut Vec<TraceEvent>) -> anyhow::Result<()> {
        let mut pfd = libc::pollfd {
            fd: self.events.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; EINTR (Ctrl-C) just returns early.
        unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as i32) };
        let mut raw = Vec::new();
        while let Some(item) = self.events.next() {
            raw.push(item.to_vec());
        }
        let start = out.len();
        out.extend(raw.iter().filter_map(|b| self.decode(b)));
        out[start..].sort_by_key(TraceEvent::time_ns);
        Ok(())
    }

    fn lost(&self) -> u64 {
        // Counted by the programs when the ring had no room.
        self.drops
            .get(&0, 0)
            .map(|per_cpu| per_cpu.iter().sum())
            .unwrap_or(0)
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}
