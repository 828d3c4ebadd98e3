//! What blocked threads wait in, in user space, without BPF: every 50 ms,
//! each thread of the processes that sleeps in a call threads wait in for
//! each other (futex, System V semaphores) has its user stack read from
//! /proc (`sys::procfs::stack`) and unwound from the binaries' DWARF CFI,
//! as a `--call-graph dwarf` sample would be. Runtimes built without frame
//! pointers (CPython, glibc) show their lock functions this way, where the
//! BPF off-CPU profile's frame-pointer walk stops in libc.
//! `analysis::locks` then says which lock each stack waits for.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::instruments::profile::symbolize::{RecordOptions, Recorder};
use crate::instruments::profile::unwind::{CallGraph, DEFAULT_STACK_SIZE};
use crate::model::profile::Profile;
use crate::sys::perf::{Record, Sample, UserRegs};
use crate::sys::procfs::{stack, syscalls};

/// Between two sweeps.
const EVERY: Duration = Duration::from_millis(50);
/// The most threads looked at in one sweep (the cost stays bounded).
const MOST_THREADS: usize = 256;

/// The calls threads wait for each other in.
const WAITS: &[&str] = &["futex", "futex_waitv", "semop", "semtimedop"];

/// A sweep's stacks (one sample per thread seen waiting, per sweep) and how
/// many thread samples were taken in all (waiting or not).
pub struct Sweep {
    pub profile: Profile,
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
            bp: 0,
        }),
        user_stack: &bytes,
    };
    recorder.record(&Record::Sample(sample));
}

/// Sweep the threads of `pids` for `window` (cut short when `stop` is set).
pub fn sweep(pids: &[i32], window: Duration, stop: &AtomicBool) -> anyhow::Result<Sweep> {
    let mut recorder = Recorder::new(RecordOptions {
        call_graph: CallGraph::Dwarf,
        user_only: true,
        ..Default::default()
    });
    for &pid in pids {
        recorder.capture(pid as u32);
    }
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
            if !syscalls::name(b.nr as i64).is_some_and(|n| WAITS.contains(&n)) {
                continue;
            }
            record(&mut recorder, pid, tid, b);
        }
        Ok(())
    })?;
    let mut profile = Profile {
        target: crate::instruments::profile::target_name(pids),
        ..Default::default()
    };
    profile.cost.wall_secs = start.elapsed().as_secs_f64();
    recorder.finish(&mut profile);
    Ok(Sweep {
        profile,
        thread_samples,
    })
}
