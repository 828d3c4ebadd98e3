//! What an off-CPU profile says: blocked time by state, by wait point (the
//! kernel function a thread slept in, below the scheduler's own), and the
//! top blocking paths; and the tally of the coarse /proc view.

use std::collections::HashMap;
use std::time::Duration;

use crate::analysis::fold::folded_frame;
use crate::model::offcpu::{BlockingPath, StateShare, Summary, WaitPoint, WaitRow, WaitSamples};
use crate::model::profile::{Frame, OffState, Profile};

/// Kernel functions that only put a thread to sleep: a wait point is the
/// innermost frame that is none of these (what /proc/PID/wchan shows too,
/// give or take the kernel's own list, `__sched` functions).
fn scheduler_function(name: &str) -> bool {
    let name = name.trim_start_matches('_');
    name.starts_with("schedule")
        || name.starts_with("io_schedule")
        || name.starts_with("preempt_schedule")
        || name.starts_with("cond_resched")
        || name == "do_nanosleep"
        || name == "bit_wait"
        || name == "bit_wait_io"
}

/// The wait point of a stack: the innermost kernel frame below the
/// scheduler's own, else the innermost frame.
fn wait_point(frames: &[Frame]) -> Option<&Frame> {
    frames
        .iter()
        .rev()
        .take_while(|f| f.kernel)
        .find(|f| !scheduler_function(&f.name))
        .or(frames.last())
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// Summarise an off-CPU `profile` (weights in ns): `n` wait points and
/// paths at most.
pub fn summarize(profile: &Profile, n: usize) -> Summary {
    let total_ns = profile.total_weight();
    let blocks = profile.stacks.iter().map(|s| s.samples).sum();
    let mut states: HashMap<OffState, (u64, u64)> = HashMap::new();
    let mut points: HashMap<(String, OffState), (u64, u64)> = HashMap::new();
    // (state, frames) -> (ns, blocks, ns per comm)
    type PathSum = (u64, u64, HashMap<String, u64>);
    let mut merged: HashMap<(OffState, Vec<String>), PathSum> = HashMap::new();
    for s in &profile.stacks {
        let state = s.state.unwrap_or(OffState::Other);
        let e = states.entry(state).or_default();
        e.0 += s.weight;
        e.1 += s.samples;
        if let Some(f) = wait_point(&s.frames) {
            let e = points.entry((f.name.clone(), state)).or_default();
            e.0 += s.weight;
            e.1 += s.samples;
        }
        let frames = s.frames.iter().map(folded_frame).collect();
        let e = merged.entry((state, frames)).or_default();
        e.0 += s.weight;
        e.1 += s.samples;
        *e.2.entry(s.comm.clone()).or_default() += s.weight;
    }
    let mut paths: Vec<BlockingPath> = merged
        .into_iter()
        .map(|((state, frames), (ns, blocks, comms))| {
            let mut comms: Vec<(String, u64)> = comms.into_iter().collect();
            comms.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            BlockingPath {
                comms: comms.into_iter().map(|(c, _)| c).collect(),
                state,
                frames,
                ns,
                blocks,
                percent: percent(ns, total_ns),
            }
        })
        .collect();
    let (by_state, wait_points) = shares(states, points, total_ns, n);
    paths.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.frames.cmp(&b.frames)));
    paths.truncate(n);
    Summary {
        total_ns,
        blocks,
        by_state,
        wait_points,
        paths,
    }
}

/// Summarise the coarse /proc view the same way: its estimated times by
/// state and by wait channel (the system call where the kernel names
/// none), `n` wait points at most; `blocks` counts samples, and there are
/// no paths, /proc showing no stacks.
pub fn summarize_waits(w: &WaitSamples, n: usize) -> Summary {
    let mut states: HashMap<OffState, (u64, u64)> = HashMap::new();
    let mut points: HashMap<(String, OffState), (u64, u64)> = HashMap::new();
    for r in &w.rows {
        let point = if r.wchan.is_empty() {
            &r.syscall
        } else {
            &r.wchan
        };
        for e in [
            states.entry(r.state).or_default(),
            points.entry((point.clone(), r.state)).or_default(),
        ] {
            e.0 += r.est_ns;
            e.1 += r.samples;
        }
    }
    let total_ns = w.rows.iter().map(|r| r.est_ns).sum();
    let (by_state, wait_points) = shares(states, points, total_ns, n);
    Summary {
        total_ns,
        blocks: w.samples,
        by_state,
        wait_points,
        paths: Vec::new(),
    }
}

/// Time and blocks by state and by wait point, as shares of `total_ns`,
/// largest first; `n` wait points at most.
fn shares(
    states: HashMap<OffState, (u64, u64)>,
    points: HashMap<(String, OffState), (u64, u64)>,
    total_ns: u64,
    n: usize,
) -> (Vec<StateShare>, Vec<WaitPoint>) {
    let mut by_state: Vec<StateShare> = states
        .into_iter()
        .map(|(state, (ns, blocks))| StateShare {
            state,
            ns,
            blocks,
            percent: percent(ns, total_ns),
        })
        .collect();
    by_state.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.state.cmp(&b.state)));
    let mut wait_points: Vec<WaitPoint> = points
        .into_iter()
        .map(|((function, state), (ns, blocks))| WaitPoint {
            function,
            state,
            ns,
            blocks,
            percent: percent(ns, total_ns),
        })
        .collect();
    wait_points.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.function.cmp(&b.function)));
    wait_points.truncate(n);
    (by_state, wait_points)
}

/// The coarse view's samples, added up as they come.
#[derive(Debug, Default)]
pub struct WaitTally {
    rows: HashMap<(String, OffState, String, String), (u64, u64)>,
    samples: u64,
}

impl WaitTally {
    /// One thread of `comm` found off the CPU, standing for `weight`.
    pub fn add(
        &mut self,
        comm: &str,
        state: OffState,
        wchan: &str,
        syscall: &str,
        weight: Duration,
    ) {
        let e = self
            .rows
            .entry((comm.into(), state, wchan.into(), syscall.into()))
            .or_default();
        e.0 += 1;
        e.1 += weight.as_nanos() as u64;
        self.samples += 1;
    }

    /// The rows, largest estimated time first.
    pub fn finish(self, sweeps: u64) -> WaitSamples {
        let mut rows: Vec<WaitRow> = self
            .rows
            .into_iter()
            .map(
                |((comm, state, wchan, syscall), (samples, est_ns))| WaitRow {
                    comm,
                    state,
                    wchan,
                    syscall,
                    samples,
                    est_ns,
                    times: Vec::new(),
                },
            )
            .collect();
        rows.sort_by(|a, b| {
            b.est_ns
                .cmp(&a.est_ns)
                .then_with(|| (&a.comm, &a.wchan).cmp(&(&b.comm, &b.wchan)))
        });
        WaitSamples {
            sweeps,
            samples: self.samples,
            rows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::profile::{Stack, WeightUnit};

    fn stack(comm: &str, state: OffState, frames: &[&str], blocks: u64, ns: u64) -> Stack {
        Stack {
            comm: comm.into(),
            frames: frames
                .iter()
                .map(|f| crate::analysis::fold::frame_of(f))
                .collect(),
            samples: blocks,
            weight: ns,
            user_depth: 2,
            state: Some(state),
            waker: None,
            ongoing: false,
        }
    }

    #[test]
    fn states_wait_points_and_paths_by_blocked_time() {
        let p = Profile {
            unit: WeightUnit::Nanoseconds,
            stacks: vec![
                stack(
                    "locker",
                    OffState::S,
                    &[
                        "worker",
                        "take_lock",
                        "syscall",
                        "do_syscall_64_[k]",
                        "futex_wait_[k]",
                        "futex_wait_queue_[k]",
                        "schedule_[k]",
                        "__schedule_[k]",
                    ],
                    30,
                    600_000_000,
                ),
                stack(
                    "writer",
                    OffState::D,
                    &[
                        "main",
                        "write",
                        "vfs_write_[k]",
                        "iomap_dio_rw_[k]",
                        "io_schedule_timeout_[k]",
                        "schedule_timeout_[k]",
                        "schedule_[k]",
                        "__schedule_[k]",
                    ],
                    100,
                    300_000_000,
                ),
                stack(
                    "locker",
                    OffState::S,
                    &["worker", "nanosleep"],
                    10,
                    100_000_000,
                ),
            ],
            ..Default::default()
        };
        let s = summarize(&p, 10);
        assert_eq!(s.total_ns, 1_000_000_000);
        assert_eq!(s.blocks, 140);
        assert_eq!(s.by_state[0].state, OffState::S);
        assert_eq!(s.by_state[0].ns, 700_000_000);
        assert!((s.by_state[1].percent - 30.0).abs() < 1e-9);
        let points: Vec<(&str, u64)> = s
            .wait_points
            .iter()
            .map(|w| (w.function.as_str(), w.ns))
            .collect();
        // Below the scheduler: futex_wait_queue and iomap_dio_rw; a stack
        // without kernel frames waits in its innermost frame.
        assert_eq!(
            points,
            [
                ("futex_wait_queue", 600_000_000),
                ("iomap_dio_rw", 300_000_000),
                ("nanosleep", 100_000_000)
            ]
        );
        assert_eq!(s.paths[0].comms, ["locker"]);
        assert!(s.paths[0].frames.contains(&"take_lock".to_string()));
        assert_eq!(s.paths[1].frames.last().unwrap(), "__schedule_[k]");
        assert!((s.paths[0].percent - 60.0).abs() < 1e-9);
    }

    #[test]
    fn paths_sum_over_threads() {
        let p = Profile {
            unit: WeightUnit::Nanoseconds,
            stacks: vec![
                stack("worker-1", OffState::S, &["run", "lock"], 2, 200),
                stack("worker-2", OffState::S, &["run", "lock"], 3, 300),
                stack("worker-2", OffState::D, &["run", "lock"], 1, 50),
                stack("main", OffState::S, &["join"], 1, 400),
            ],
            ..Default::default()
        };
        let s = summarize(&p, 10);
        assert_eq!(s.paths.len(), 3);
        assert_eq!(s.paths[0].comms, ["worker-2", "worker-1"]);
        assert_eq!((s.paths[0].ns, s.paths[0].blocks), (500, 5));
        assert_eq!(s.paths[1].comms, ["main"]);
        assert_eq!(s.paths[2].state, OffState::D);
    }

    #[test]
    fn tally_adds_weights_per_row() {
        let mut t = WaitTally::default();
        let ms = Duration::from_millis;
        t.add("dd", OffState::D, "folio_wait_bit", "write", ms(10));
        t.add("dd", OffState::D, "folio_wait_bit", "write", ms(12));
        t.add("sh", OffState::S, "do_wait", "wait4", ms(10));
        let w = t.finish(3);
        assert_eq!((w.sweeps, w.samples), (3, 3));
        assert_eq!(w.rows[0].comm, "dd");
        assert_eq!((w.rows[0].samples, w.rows[0].est_ns), (2, 22_000_000));
        assert_eq!(w.rows[1].syscall, "wait4");
    }

    /// The /proc view's summary holds what its samples measured, by state
    /// and wait channel (the system call where none was read).
    #[test]
    fn proc_samples_are_summarized_by_state_and_wait_channel() {
        let mut t = WaitTally::default();
        let ms = Duration::from_millis;
        t.add("dd", OffState::D, "folio_wait_bit", "write", ms(30));
        t.add("sleep", OffState::S, "", "clock_nanosleep", ms(10));
        t.add("sh", OffState::S, "do_wait", "wait4", ms(60));
        let s = summarize_waits(&t.finish(3), 10);
        assert_eq!((s.total_ns, s.blocks), (100_000_000, 3));
        let states: Vec<_> = s.by_state.iter().map(|b| (b.state, b.ns)).collect();
        assert_eq!(
            states,
            [(OffState::S, 70_000_000), (OffState::D, 30_000_000)]
        );
        let points: Vec<_> = s
            .wait_points
            .iter()
            .map(|w| (w.function.as_str(), w.ns))
            .collect();
        assert_eq!(
            points,
            [
                ("do_wait", 60_000_000),
                ("folio_wait_bit", 30_000_000),
                ("clock_nanosleep", 10_000_000)
            ]
        );
        assert_eq!(s.wait_points[0].percent, 60.0);
        assert!(s.paths.is_empty());
    }
}
