//! The coarse tier of `kdiag offcpu`, for machines without BPF: every
//! 10 ms, each target thread's state, and for a thread off the CPU its wait
//! channel (/proc/TID/wchan: the kernel function it sleeps in) and system
//! call (/proc/TID/syscall). Each sample stands for the time since the
//! previous sweep. No stacks: a sampled wait channel is all /proc tells.
//!
//! /proc shows a preempted thread as R, like a running one, so this view
//! sees only S, D, I and T.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::source::{Found, Options};
use crate::analysis::offcpu::WaitTally;
use crate::instruments::{ReportSource, Tier};
use crate::model::offcpu::{BlockCounts, Collection, StateFilter, WaitSamples};
use crate::model::profile::{OffState, Profile};
use crate::sys::procfs::{parse, tids};

/// The sampling interval.
pub const INTERVAL: Duration = Duration::from_millis(10);

/// Whose threads to sample.
#[derive(Debug, Clone)]
pub enum Targets {
    /// These processes, and with `follow` their descendants.
    Pids { pids: Vec<i32>, follow: bool },
    /// Every process.
    All,
}

/// Sweeps /proc every [`INTERVAL`] while polled.
pub struct OffcpuProc {
    targets: Targets,
    states: StateFilter,
    tally: WaitTally,
    sweeps: u64,
    last: Option<Instant>,
    /// When the next sweep is due.
    next: Instant,
    /// With `Options::per_thread`: each row's samples as (CLOCK_MONOTONIC
    /// ns of the sweep, ns it stands for).
    times: Option<HashMap<RowKey, Vec<(u64, u64)>>>,
}

/// A row of the tally: comm, state, wait channel, system call.
type RowKey = (String, OffState, String, String);

impl OffcpuProc {
    /// The processes of `options` (none: every process), descendants
    /// followed.
    pub fn new(options: &Options) -> OffcpuProc {
        let targets = if options.tgids.is_empty() {
            Targets::All
        } else {
            Targets::Pids {
                pids: options.tgids.iter().map(|&p| p as i32).collect(),
                follow: true,
            }
        };
        OffcpuProc {
            times: options.per_thread.then(HashMap::new),
            ..OffcpuProc::of(targets, options.states)
        }
    }

    pub fn of(targets: Targets, states: StateFilter) -> OffcpuProc {
        OffcpuProc {
            targets,
            states,
            tally: WaitTally::default(),
            sweeps: 0,
            last: None,
            next: Instant::now(),
            times: None,
        }
    }

    /// One pass over the target's threads.
    pub fn sweep(&mut self) {
        let now = Instant::now();
        // A sample stands for the time since the previous sweep (the first
        // for one interval): sweeps slower than 10 ms still add up right.
        let weight = self.last.map_or(INTERVAL, |l| now - l);
        self.last = Some(now);
        self.sweeps += 1;
        for pid in self.processes() {
            for tid in tids(pid) {
                self.sample(pid, tid, weight);
            }
        }
    }

    fn processes(&self) -> Vec<i32> {
        match &self.targets {
            Targets::All => crate::sys::procfs::pids().unwrap_or_default(),
            Targets::Pids { pids, follow } => {
                let mut all = pids.clone();
                if *follow {
                    let mut i = 0;
                    while i < all.len() {
                        all.extend(children(all[i]));
                        i += 1;
                    }
                }
                all
            }
        }
    }

    fn sample(&mut self, pid: i32, tid: i32, weight: Duration) {
        let dir = format!("/proc/{pid}/task/{tid}");
        let Some(st) = std::fs::read(format!("{dir}/stat"))
            .ok()
            .and_then(|b| parse::stat(&b))
        else {
            return;
        };
        let state = match st.state {
            'S' => OffState::S,
            'D' => OffState::D,
            'I' => OffState::I,
            'T' | 't' => OffState::T,
            // R is running or runnable, which /proc does not tell apart;
            // Z and X are gone.
            _ => return,
        };
        if !self.states.keeps(state) {
            return;
        }
        let wchan = std::fs::read_to_string(format!("{dir}/wchan")).unwrap_or_default();
        let wchan = if wchan == "0" { String::new() } else { wchan };
        let syscall = std::fs::read_to_string(format!("{dir}/syscall"))
            .map(|s| syscall_name(&s))
            .unwrap_or_default();
        self.tally.add(&st.comm, state, &wchan, &syscall, weight);
        if let Some(times) = &mut self.times {
            times
                .entry((st.comm, state, wchan, syscall))
                .or_default()
                .push((crate::sys::monotonic_ns(), weight.as_nanos() as u64));
        }
    }

    pub fn finish(self) -> WaitSamples {
        let mut waits = self.tally.finish(self.sweeps);
        if let Some(mut times) = self.times {
            for r in &mut waits.rows {
                let key = (r.comm.clone(), r.state, r.wchan.clone(), r.syscall.clone());
                r.times = times.remove(&key).unwrap_or_default();
            }
        }
        waits
    }
}

impl ReportSource<Profile, Found> for OffcpuProc {
    fn tier(&self) -> Tier {
        Tier::Procfs
    }

    fn watch(&mut self, tgid: u32, _comm: &str) -> anyhow::Result<()> {
        if let Targets::Pids { pids, .. } = &mut self.targets
            && !pids.contains(&(tgid as i32))
        {
            pids.push(tgid as i32);
        }
        Ok(())
    }

    /// Sweep whenever one is due until `timeout` has passed.
    fn poll(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let end = Instant::now() + timeout;
        loop {
            let now = Instant::now();
            if self.next > end {
                std::thread::sleep(end.saturating_duration_since(now));
                return Ok(());
            }
            std::thread::sleep(self.next.saturating_duration_since(now));
            let t = Instant::now();
            self.sweep();
            self.next = t + INTERVAL;
        }
    }

    fn finish(self: Box<Self>, _profile: &mut Profile) -> anyhow::Result<Found> {
        Ok(Found {
            counts: BlockCounts::default(),
            waits: Some(OffcpuProc::finish(*self)),
            collection: Collection::Proc {
                interval_ms: INTERVAL.as_millis() as u64,
            },
        })
    }
}

/// The children of every thread of `pid` (needs CONFIG_PROC_CHILDREN).
fn children(pid: i32) -> Vec<i32> {
    tids(pid)
        .into_iter()
        .filter_map(|tid| std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// The system call named in a /proc/TID/syscall line: its name, `-` when
/// the thread is blocked outside any (a page fault), empty if unknown.
pub fn syscall_name(line: &str) -> String {
    let first = line.split_whitespace().next().unwrap_or("");
    match first.parse::<i64>() {
        Ok(-1) => "-".into(),
        Ok(n) => crate::sys::procfs::syscalls::name(n)
            .map_or_else(|| format!("syscall {n}"), str::to_string),
        // "running": not blocked when read.
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_syscalls_from_proc_lines() {
        let futex = format!(
            "{} 0x7f 0x80 0x2 0x0 0x0 0x0 0x7ffc 0x7f12",
            libc::SYS_futex
        );
        assert_eq!(syscall_name(&futex), "futex");
        assert_eq!(syscall_name("-1 0x7ffc 0x55d0"), "-");
        assert_eq!(syscall_name("running"), "");
        assert_eq!(syscall_name("99999 0x0"), "syscall 99999");
    }

    #[test]
    fn samples_a_sleeping_thread_of_our_own() {
        // A thread of this test process asleep in nanosleep for the sweep.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let sleeper = std::thread::spawn(move || {
            let _ = rx.recv_timeout(Duration::from_secs(10));
        });
        std::thread::sleep(Duration::from_millis(50));
        let mut s = OffcpuProc::of(
            Targets::Pids {
                pids: vec![std::process::id() as i32],
                follow: false,
            },
            StateFilter::S,
        );
        s.sweep();
        s.sweep();
        tx.send(()).unwrap();
        sleeper.join().unwrap();
        let w = s.finish();
        assert_eq!(w.sweeps, 2);
        // Waiting on a channel is a futex wait.
        assert!(
            w.rows
                .iter()
                .any(|r| r.state == OffState::S && r.syscall == "futex"),
            "{w:?}"
        );
        assert!(w.rows.iter().all(|r| r.state == OffState::S));
    }
}
