//! What blocked threads wait in, in user space, without BPF: every 50 ms,
//! each thread of the processes that sleeps in a call a lock waits in
//! (futex, System V semaphores, a latch's epoll_wait) has its user stack
//! read from
//! /proc (`sys::procfs::stack`) and unwound from the binaries' DWARF CFI,
//! as a `--call-graph dwarf` sample would be. Runtimes built without frame
//! pointers (CPython, glibc) show their lock functions this way, where the
//! BPF off-CPU profile's frame-pointer walk stops in libc.
//! `analysis::locks` then says which lock each stack waits for.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::instruments::profile::symbolize::{RecordOptions, Recorder};
use crate::instruments::profile::unwind::{CallGraph, DEFAULT_STACK_SIZE, UNKNOWN_BP};
use crate::model::locks::LOCK_CALLS;
use crate::model::profile::Profile;
use crate::sys::perf::{Record, Sample, UserRegs};
use crate::sys::procfs::{stack, syscalls};

/// Between two sweeps.
const EVERY: Duration = Duration::from_millis(50);
/// The most threads looked at in one sweep (the cost stays bounded).
const MOST_THREADS: usize = 256;

/// A sweep's stacks (one sample per thread seen waiting, per sweep), a
/// profile per call they waited in, and how many thread samples were taken
/// in all (waiting or not).
pub struct Sweep {
    pub by_call: Vec<(&'static str, Profile)>,
    pub thread_samples: u64,
}

/// One blocked thread's user stack, outermost frame first, as the sweep
/// reads it; empty when it is not in a call or its stack cannot be read.
pub fn stack_of(pid: i32, tid: i32) -> Vec<String> {
    let Some(b) = stack::blocked(pid, tid) else {
        return Vec::new();
    };
    let mut recorder = Recorder::new(RecordOptions {
        call_graph: CallGraph::Dwarf,
        user_only: true,
        ..Default::default()
    });
    recorder.capture(pid as u32);
    record(&mut recorder, pid, tid, b);
    let mut profile = Profile::default();
    recorder.finish(&mut profile);
    profile
        .stacks
        .into_iter()
        .next()
        .map_or_else(Vec::new, |s| s.frames.into_iter().map(|f| f.name).collect())
}

/// One sample of a thread asleep in a call: its registers and the bytes
/// of its stack, unwound as a `--call-graph dwarf` sample would be.
fn record(recorder: &mut Recorder, pid: i32, tid: i32, b: stack::Blocked) {
    let bytes = stack::read_stack(pid, tid, b.sp, DEFAULT_STACK_SIZE as usize);
    let sample = Sample {
        ip: b.pc,
        pid: pid as u32,
        tid: tid as u32,
        time: 0,
        cpu: 0,
        period: 1,
        callchain: Default::default(),
        raw: &[],
        user_regs: Some(UserRegs {
            ip: b.pc,
            sp: b.sp,
            bp: UNKNOWN_BP,
        }),
        user_stack: &bytes,
    };
    recorder.record(&Record::Sample(sample));
}

/// Sweep the threads of `pids` for `window` (cut short when `stop` is set).
pub fn sweep(pids: &[i32], window: Duration, stop: &AtomicBool) -> anyhow::Result<Sweep> {
    // One recorder per call, made when a thread is first seen in it: the
    // waits are relabelled call by call (`analysis::locks::relabel`).
    let mut recorders: Vec<(&'static str, Recorder)> = Vec::new();
    let (start, mut thread_samples, mut next) = (Instant::now(), 0u64, Instant::now());
    super::for_window(window, stop, |wait| {
        if Instant::now() < next {
            std::thread::sleep(wait.min(next - Instant::now()));
            return Ok(());
        }
        next += EVERY;
        let threads = pids
            .iter()
            .flat_map(|&p| crate::sys::procfs::tids(p).into_iter().map(move |t| (p, t)));
        for (pid, tid) in threads.take(MOST_THREADS) {
            thread_samples += 1;
            let Some(b) = stack::blocked(pid, tid) else {
                continue;
            };
            let Some(call) = syscalls::name(b.nr as i64).filter(|n| LOCK_CALLS.contains(n)) else {
                continue;
            };
            let i = match recorders.iter().position(|(c, _)| *c == call) {
                Some(i) => i,
                None => {
                    let mut r = Recorder::new(RecordOptions {
                        call_graph: CallGraph::Dwarf,
                        user_only: true,
                        ..Default::default()
                    });
                    for &pid in pids {
                        r.capture(pid as u32);
                    }
                    recorders.push((call, r));
                    recorders.len() - 1
                }
            };
            record(&mut recorders[i].1, pid, tid, b);
        }
        Ok(())
    })?;
    let wall_secs = start.elapsed().as_secs_f64();
    let by_call = recorders
        .into_iter()
        .map(|(call, r)| {
            let mut profile = Profile {
                target: crate::instruments::profile::target_name(pids),
                ..Default::default()
            };
            profile.cost.wall_secs = wall_secs;
            r.finish(&mut profile);
            (call, profile)
        })
        .collect();
    Ok(Sweep {
        by_call,
        thread_samples,
    })
}
