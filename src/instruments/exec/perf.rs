//! The perf tier of exec tracing: tracepoints through perf_event_open (the
//! lead's engine in `sys::perf`), decoded by field name from tracefs.
//!
//! What it cannot see, unlike the BPF tier: the syscall's user strings. The
//! filename of a successful exec comes from sched_process_exec; a failed
//! exec's filename is known only for the command kdiag spawned itself.
//! Arguments come from /proc/PID/cmdline after a successful exec (best
//! effort: a short-lived process may be gone). Exit codes are unknown
//! (sched_process_exit has none) except for the spawned command, whose
//! status the caller gets from wait4.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::source::{Filter, Spawned};
use crate::instruments::{Source, Tier};
use crate::model::exec::{
    ExecEvent, Exit, Fork, PrepareExec, ProcessEnd, SignalEvent, TraceEvent, errno_name,
    si_code_name, signal_name,
};
use crate::sys::kallsyms::KernelSymbols;
use crate::sys::perf::{EventSpec, Record, Session, Space, Target};
use crate::sys::procfs::parse::{self, Status};
use crate::sys::tracefs::{EventFormat, Tracefs};

/// The tracepoints this tier reads, by role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    ExitExecve,
    ExitExecveat,
    ProcessExec,
    PrepareExec,
    Signal,
    ProcessExit,
    ProcessFork,
}

pub struct ExecPerf {
    session: Session,
    formats: Vec<(Role, EventFormat)>,
    filter: Filter,
    /// The command kdiag spawned and the path it passed to execve.
    spawned: Option<Spawned>,
    spawned_ran: bool,
    /// Processes being traced (the target and its descendants).
    watched: HashSet<u32>,
    /// Filename of the last successful exec per pid (sched_process_exec
    /// comes just before sys_exit_execve).
    exec_names: HashMap<u32, String>,
    ksyms: Option<KernelSymbols>,
    notes: Vec<String>,
}

impl ExecPerf {
    pub fn open(filter: Filter, spawned: Option<Spawned>) -> anyhow::Result<ExecPerf> {
        let fs = Tracefs::open()?;
        let mut wanted = vec![
            (Role::ExitExecve, "syscalls", "sys_exit_execve"),
            (Role::ExitExecveat, "syscalls", "sys_exit_execveat"),
            (Role::ProcessExec, "sched", "sched_process_exec"),
        ];
        let mut notes = vec![
            "perf tier: failed execs show a filename only for the command kdiag started; \
             arguments come from /proc/PID/cmdline after a successful exec (best effort)"
                .to_string(),
        ];
        if filter.signals {
            wanted.push((Role::Signal, "signal", "signal_generate"));
            wanted.push((Role::ProcessExit, "sched", "sched_process_exit"));
            wanted.push((Role::ProcessFork, "sched", "sched_process_fork"));
            if fs.has_event("sched", "sched_prepare_exec") {
                wanted.push((Role::PrepareExec, "sched", "sched_prepare_exec"));
            } else {
                notes.push("this kernel has no sched_prepare_exec (added in 6.10)".into());
            }
            notes.push(
                "perf tier: exit codes of processes other than the started command are unknown, \
                 and fault addresses (si_addr) are not recorded"
                    .into(),
            );
        }
        let mut formats = Vec::new();
        let mut specs = Vec::new();
        for (role, system, name) in wanted {
            let format = fs.event(system, name)?;
            let mut spec = EventSpec::tracepoint(format.id);
            if filter.signals {
                // One ring per CPU needs the same sample fields for all.
                spec = spec.with_callchain();
            }
            specs.push(spec);
            formats.push((role, format));
        }
        // All events share one ring per CPU, so records of one CPU arrive in
        // time order; as much room as the separate rings they replace had.
        let pages = if filter.pid.is_some() { 8 } else { 32 } * specs.len();
        // One user's: events on their processes and the children they start
        // (a tracepoint has no uid to filter on).
        let session = match (filter.pid, filter.scope.processes()?) {
            (Some(pid), _) => Session::open(&specs, Target::Process(pid as i32), pages)?,
            (None, Some(pids)) => Session::open_processes(&specs, &pids, pages)?,
            (None, None) => Session::open(&specs, Target::AllCpus, pages)?,
        };
        session.enable()?;
        Ok(ExecPerf {
            session,
            formats,
            filter,
            spawned,
            spawned_ran: false,
            watched: filter.pid.into_iter().collect(),
            exec_names: HashMap::new(),
            ksyms: None,
            notes,
        })
    }

    fn watching(&self, pid: u32) -> bool {
        self.filter.pid.is_none() || self.watched.contains(&pid)
    }
}

/// A sample copied out of its ring, with its kernel frames.
struct RawSample {
    pid: u32,
    tid: u32,
    time: u64,
    raw: Vec<u8>,
    kernel: Vec<u64>,
}

/// Decode one raw sample into an event (None for events not of interest).
fn decode(
    s: &mut ExecPerf,
    pid: u32,
    tid: u32,
    time: u64,
    raw: &[u8],
    kernel: Vec<u64>,
) -> Option<TraceEvent> {
    let ty = s.formats.first()?.1.field("common_type").ok()?.u64(raw)?;
    let (role, f) = s.formats.iter().find(|(_, f)| f.id == ty)?;
    let (role, f) = (*role, f.clone());
    let num = |name: &str| f.try_field(name).and_then(|x| x.i64(raw));
    let text = |name: &str| {
        f.try_field(name)
            .and_then(|x| x.str(raw))
            .map(|c| c.into_owned())
    };
    Some(match role {
        Role::ExitExecve | Role::ExitExecveat => {
            let ret = num("ret")?;
            let mut filename = None;
            let mut argv = Vec::new();
            if ret == 0 {
                filename = s.exec_names.remove(&pid);
                argv = cmdline(pid);
            }
            if let Some(sp) = &s.spawned
                && sp.pid == pid
                && !s.spawned_ran
            {
                filename = Some(sp.path.clone());
                argv = sp.argv.clone();
                s.spawned_ran = ret == 0;
            }
            TraceEvent::Exec(ExecEvent {
                time_ns: time,
                pid,
                tid,
                ppid: ppid(pid),
                uid: uid(pid),
                // A short-lived process may be gone: the kernel names a new
                // program after its file's base name.
                comm: Some(comm(pid))
                    .filter(|c| !c.is_empty())
                    .unwrap_or_else(|| {
                        let base = filename.as_deref().and_then(|f| f.rsplit('/').next());
                        base.unwrap_or_default().chars().take(15).collect()
                    }),
                syscall: if role == Role::ExitExecveat {
                    "execveat"
                } else {
                    "execve"
                },
                filename,
                argv,
                argv_truncated: false,
                ret,
                errno: (ret < 0).then(|| errno_name(-ret as i32)).flatten(),
            })
        }
        Role::ProcessExec => {
            s.exec_names.insert(pid, text("filename")?);
            return None;
        }
        Role::PrepareExec => TraceEvent::PrepareExec(PrepareExec {
            time_ns: time,
            pid,
            filename: text("filename")?,
            interp: text("interp").unwrap_or_default(),
        }),
        Role::Signal => {
            let target = num("pid")? as u32;
            // signal_generate names the thread. A watched pid is a process
            // (its own thread group's leader); another thread's process is
            // asked of /proc, which may already have forgotten it.
            let tgid = if s.watching(target) {
                target
            } else {
                tgid_of(target).unwrap_or(target)
            };
            if !s.watching(tgid) {
                return None;
            }
            let sig = num("sig")? as i32;
            let code = num("code")? as i32;
            let ksyms = s.ksyms.get_or_insert_with(KernelSymbols::load);
            TraceEvent::Signal(SignalEvent {
                time_ns: time,
                sig,
                sig_name: signal_name(sig),
                code,
                code_name: si_code_name(sig, code),
                errno: num("errno").unwrap_or(0) as i32,
                pid: tgid,
                tid: target,
                comm: text("comm").unwrap_or_default(),
                sender_pid: pid,
                sender_comm: comm(pid),
                addr: None,
                kernel_stack: ksyms.stack(kernel),
            })
        }
        Role::ProcessFork => {
            let child = num("child_pid")? as u32;
            // Threads: the child shares the parent's tgid.
            if tgid_of(child) == Some(pid) || !s.watching(pid) {
                return None;
            }
            s.watched.insert(child);
            TraceEvent::Fork(Fork {
                time_ns: time,
                parent: pid,
                child,
            })
        }
        Role::ProcessExit => {
            if pid != tid || !s.watching(pid) {
                return None;
            }
            TraceEvent::Exit(ProcessEnd {
                time_ns: time,
                pid,
                comm: comm(pid),
                exit: Exit::Unknown,
            })
        }
    })
}

impl Source for ExecPerf {
    type Event = TraceEvent;

    fn tier(&self) -> Tier {
        Tier::Perf
    }

    fn poll(&mut self, timeout: Duration, out: &mut Vec<TraceEvent>) -> anyhow::Result<()> {
        // Copy the samples out first: decoding needs &mut self.
        let mut samples: Vec<RawSample> = Vec::new();
        self.session.poll(timeout)?;
        self.session.drain(|r| {
            if let Record::Sample(s) = r {
                let kernel = s
                    .callchain
                    .frames()
                    .filter(|(space, _)| *space == Space::Kernel)
                    .map(|(_, ip)| ip)
                    .collect();
                samples.push(RawSample {
                    pid: s.pid,
                    tid: s.tid,
                    time: s.time,
                    raw: s.raw.to_vec(),
                    kernel,
                });
            }
        });
        samples.sort_by_key(|s| s.time);
        for s in samples {
            if let Some(e) = decode(self, s.pid, s.tid, s.time, &s.raw, s.kernel) {
                out.push(e);
            }
        }
        Ok(())
    }

    fn lost(&self) -> u64 {
        self.session.losses().lost
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}

fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_default()
}

/// /proc/PID/status, while the task lives.
fn status(pid: u32) -> Option<Status> {
    std::fs::read(format!("/proc/{pid}/status"))
        .ok()
        .map(|b| parse::status(&b))
}

// A task being released reads 0 for its tgid and parent (its pids are
// detached first): unknown, not process 0. Taking that 0 for the tgid once
// dropped a traced process's fatal signal as someone else's.
fn ppid(pid: u32) -> u32 {
    status(pid).map_or(0, |s| s.ppid as u32)
}

fn uid(pid: u32) -> u32 {
    status(pid).map_or(0, |s| s.uid)
}

fn tgid_of(tid: u32) -> Option<u32> {
    status(tid).map(|s| s.tgid as u32).filter(|&t| t != 0)
}
