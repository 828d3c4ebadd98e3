//! Stalls, for diagnose: threads that never ran in the window (the same
//! count of timeslices in /proc/TID/schedstat at both ends, asleep at the
//! end) in a process with work waiting for it (its sockets' queues at both
//! ends, `sys::procfs::sockets`; other threads waiting on its mutexes).
//! Only those are looked at further: how long since the thread last ran,
//! and its stack.

use std::collections::HashMap;
use std::time::Instant;

use crate::model::diagnosis::LockWaits;
use crate::model::stalls::{Listener, Stall, Waiting};
use crate::sys::procfs::parse::Syscall;
use crate::sys::procfs::task::{self, TaskReader};
use crate::sys::procfs::{sockets, stack, syscalls};

/// The most threads looked at (at both ends); beyond, the first ones.
const MOST_THREADS: usize = 4096;
/// The most stalls reported (their stacks are read).
const MOST_STALLS: usize = 3;

pub struct StallWatch {
    /// When the timeslices were read: a thread with none since has not run
    /// for at least as long.
    started: Instant,
    /// Timeslices of each thread at the start.
    slices: HashMap<(i32, i32), u64>,
    /// Each process's TCP and unix sockets at the start.
    sockets: HashMap<i32, Vec<sockets::Socket>>,
}

impl StallWatch {
    pub fn start(r: &mut TaskReader, threads: &[(i32, i32)]) -> StallWatch {
        let slices = threads
            .iter()
            .take(MOST_THREADS)
            .filter_map(|&(p, t)| Some(((p, t), r.schedstat(p, t)?.2)))
            .collect();
        let mut pids: Vec<i32> = threads.iter().map(|t| t.0).collect();
        pids.dedup();
        let mut tables = sockets::Tables::default();
        let sockets = pids.into_iter().map(|p| (p, tables.of(p))).collect();
        StallWatch {
            started: Instant::now(),
            slices,
            sockets,
        }
    }

    /// The stalls at the end of the window, the longest first; `locks`:
    /// the mutexes the sampling saw waited on.
    pub fn finish(self, r: &mut TaskReader, locks: &[LockWaits]) -> Vec<Stall> {
        let mut by_pid: HashMap<i32, Vec<i32>> = HashMap::new();
        for (&(pid, tid), &n) in &self.slices {
            let asleep = r
                .stat(pid, Some(tid))
                .is_some_and(|s| matches!(s.state, 'S' | 'D'));
            if asleep && r.schedstat(pid, tid).is_some_and(|s| s.2 == n) {
                by_pid.entry(pid).or_default().push(tid);
            }
        }
        let not_run_s = self.started.elapsed().as_secs_f64();
        let mut clocks: HashMap<u32, Option<f64>> = HashMap::new();
        let mut stalls = Vec::new();
        let mut tables = sockets::Tables::default();
        for (pid, mut tids) in by_pid {
            let waiting = waiting(pid, &self.sockets, tables.of(pid), locks);
            if !waiting.any() {
                continue;
            }
            tids.sort_unstable();
            for tid in tids {
                let call = call(r, pid, tid);
                // A thread asleep on a lock waits for another: it is not
                // what the work waits for.
                if call == "futex" && waiting.queued() == 0 && waiting.unread_bytes == 0 {
                    continue;
                }
                let Some(st) = r.stat(pid, Some(tid)) else {
                    continue;
                };
                // Since it last ran, on the clock of the CPU it ran on; never
                // less than the window it did not run in.
                let now = st
                    .processor
                    .and_then(|cpu| *clocks.entry(cpu).or_insert_with(|| task::clock_ms_on(cpu)));
                let so_far_s = match (now, r.last_ran_ms(pid, tid)) {
                    (Some(n), Some(t)) if n >= t => Some(((n - t) / 1e3).max(not_run_s)),
                    _ => None,
                };
                stalls.push(Stall {
                    pid,
                    tid,
                    comm: st.comm,
                    state: st.state,
                    call,
                    wchan: r.wchan(pid, tid),
                    so_far_s,
                    stack: Vec::new(),
                    waiting: waiting.clone(),
                });
            }
        }
        // A thread in another call before one asleep on a futex (which
        // waits for another thread); the longest first.
        stalls.sort_by(|a, b| {
            (a.call == "futex")
                .cmp(&(b.call == "futex"))
                .then(
                    b.so_far_s
                        .unwrap_or(0.0)
                        .total_cmp(&a.so_far_s.unwrap_or(0.0)),
                )
                .then(a.tid.cmp(&b.tid))
        });
        stalls.truncate(MOST_STALLS);
        for s in &mut stalls {
            s.stack = crate::instruments::blocked::stack_of(s.pid, s.tid);
            s.stack.extend(
                stack::kernel(s.pid, s.tid)
                    .into_iter()
                    .rev()
                    .map(|f| format!("{f} [k]")),
            );
        }
        stalls
    }
}

/// What waits for `pid` now (`now`: its sockets): its listeners' queues (those queued at the
/// start as well: a queue that drains is served), its unread bytes, and
/// threads on its mutexes.
fn waiting(
    pid: i32,
    start: &HashMap<i32, Vec<sockets::Socket>>,
    now: Vec<sockets::Socket>,
    locks: &[LockWaits],
) -> Waiting {
    let before = start.get(&pid).map(Vec::as_slice).unwrap_or_default();
    let listeners = now
        .iter()
        .filter(|s| s.listening && s.queued > 0)
        .filter_map(|s| {
            let b = before.iter().find(|b| b.inode == s.inode && b.queued > 0)?;
            Some(Listener {
                port: s.port,
                path: s.path.clone(),
                queued_start: b.queued,
                queued_end: s.queued,
            })
        })
        .collect();
    let unread: Vec<_> = now
        .iter()
        .filter(|s| !s.listening && s.queued > 0)
        .filter(|s| before.iter().any(|b| b.inode == s.inode && b.queued > 0))
        .collect();
    Waiting {
        listeners,
        unread_sockets: unread.len(),
        unread_bytes: unread.iter().map(|s| s.queued).sum(),
        lock_waiters: locks
            .iter()
            .filter(|l| l.pid == pid)
            .map(|l| l.waiters)
            .sum(),
    }
}

/// The call a thread sleeps in, by name.
fn call(r: &mut TaskReader, pid: i32, tid: i32) -> String {
    match r.syscall(pid, tid) {
        Some(Syscall::In { nr, .. }) => syscalls::name(nr).map_or(format!("#{nr}"), String::from),
        Some(Syscall::NotInSyscall) => "fault".into(),
        _ => String::new(),
    }
}
