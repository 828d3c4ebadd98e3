//! `kdiag profile`'s stages: samples recorded through `sys::perf`, user
//! stacks unwound (`unwind`, over the binaries' tables in `modules`), then
//! frames named (`symbolize`: kernel frames from kallsyms, user frames by
//! (file, offset) through blazesym; JIT code through `perf_map` and
//! `jitdump`).

pub mod jitdump;
pub mod modules;
mod names;
pub mod perf_map;
pub mod symbolize;
pub mod unwind;

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::model::profile::Profile;
use crate::sys::perf::{EventSpec, Session};

/// The CPU profile of `pid`, its threads and the children it starts, over
/// `window` at `hz` (cpu-clock, kernel and user stacks), cut short when
/// `stop` is set: what `kdiag profile -p PID -d SECS` records, for callers
/// that want it in one piece (diagnose's drill-down).
pub fn sample(pid: i32, hz: u64, window: Duration, stop: &AtomicBool) -> anyhow::Result<Profile> {
    sample_all(&[pid], hz, window, stop)
}

/// `sample` of several processes at once, into one profile (diagnose's
/// drill-down on the members of a tree that carry its verdict).
pub fn sample_all(
    pids: &[i32],
    hz: u64,
    window: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<Profile> {
    let spec = EventSpec::cpu_clock(hz).with_callchain().with_task_events();
    let mut session = Session::open_processes(std::slice::from_ref(&spec), pids, 64)?;
    session.enable()?;
    let mut recorder = symbolize::Recorder::new(symbolize::RecordOptions::default());
    for &pid in pids {
        recorder.capture(pid as u32);
    }
    let start = Instant::now();
    super::for_window(window, stop, |wait| {
        session.poll(wait)?;
        session.drain(|r| recorder.record(&r));
        Ok(())
    })?;
    let mut p = Profile {
        target: target_name(pids),
        event: spec.name().into(),
        freq_hz: hz,
        lost: session.losses().lost,
        ..Default::default()
    };
    p.cost.wall_secs = start.elapsed().as_secs_f64();
    recorder.finish(&mut p);
    Ok(p)
}

/// `PID 42 (burn)`, or `PIDs 42 (burn), 43 (burn)`: what a profile of
/// `pids` covers.
pub fn target_name(pids: &[i32]) -> String {
    let named: Vec<String> = pids
        .iter()
        .map(|p| {
            let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
            format!("{p} ({})", comm.trim())
        })
        .collect();
    format!(
        "PID{} {}",
        if pids.len() == 1 { "" } else { "s" },
        named.join(", ")
    )
}
