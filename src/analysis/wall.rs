//! One wall-clock profile from the two halves `kdiag profile --wall`
//! records: the CPU profile (cpu-clock samples, each weighing its period in
//! nanoseconds) and the off-CPU profile (nanoseconds blocked by stack and
//! state), or, without BPF, the /proc tier's wait rows. Every off-CPU stack
//! gets the kind of time it stands for (run-queue wait, storage, lock,
//! sleep, other waits) from its state and frames. Pure.

use std::collections::{BTreeMap, HashMap};

use crate::analysis::locks;
use crate::model::offcpu::WaitSamples;
use crate::model::profile::{Frame, Module, OffState, Profile, ThreadId, Waker};
use crate::model::wall::{OffcpuFrom, Root, RootTime, TimeKind, Times, Wall, WallStack};

/// The slices of time a wall-clock profile is placed in (the heat map's
/// cells), for `profile --wall` and diagnose's report alike: FlameScope's,
/// 50 a second.
pub const SLICE_NS: u64 = 20_000_000;

/// Kernel functions a thread sleeps in on purpose (nanosleep, timers).
const SLEEPS: &[&str] = &[
    "do_nanosleep",
    "hrtimer_nanosleep",
    "clock_nanosleep",
    "common_nsleep",
    "msleep",
];
/// User functions that sleep on purpose.
const USER_SLEEPS: &[&str] = &["nanosleep", "usleep", "std::thread::sleep", "sleep"];
/// Kernel functions of the kernel's own locks (a thread in D or S).
const KERNEL_LOCKS: &[&str] = &["mutex_lock", "rwsem_down", "rt_mutex"];
/// User functions of lock waits the table of `analysis::locks` does not
/// know: Rust std's Mutex and RwLock.
const USER_LOCKS: &[&str] = &["lock_contended", "read_contended", "write_contended"];
/// The syscalls and wait channels of the /proc tier that sleep on purpose.
/// (A futex there is a wait: without a stack, a lock and a condition look
/// the same.)
const PROC_SLEEPS: &[&str] = &["nanosleep", "hrtimer_nanosleep", "do_nanosleep"];

/// The kind of time a block in `state` on `frames` (outermost first) is.
pub fn kind_of(state: OffState, frames: &[Frame]) -> TimeKind {
    let kernel_has = |names: &[&str]| {
        frames
            .iter()
            .any(|f| f.kernel && names.iter().any(|n| f.name.contains(n)))
    };
    match state {
        OffState::R => TimeKind::RunQueue,
        OffState::D if kernel_has(KERNEL_LOCKS) => TimeKind::Lock,
        OffState::D => TimeKind::Storage,
        OffState::S => {
            // A runtime's own lock or condition, told apart by its user frames.
            if let Some((p, _)) = locks::matching(frames) {
                return if p.lock {
                    TimeKind::Lock
                } else {
                    TimeKind::Wait
                };
            }
            if kernel_has(SLEEPS)
                || frames
                    .iter()
                    .any(|f| !f.kernel && USER_SLEEPS.iter().any(|n| f.name.ends_with(n)))
            {
                TimeKind::Sleep
            } else if kernel_has(KERNEL_LOCKS)
                || frames
                    .iter()
                    .any(|f| !f.kernel && USER_LOCKS.iter().any(|n| f.name.contains(n)))
            {
                TimeKind::Lock
            } else {
                // A futex alone is a condition, a join or a lock of a
                // runtime the table does not know: a wait, not a lock.
                TimeKind::Wait
            }
        }
        OffState::I | OffState::T | OffState::Other => TimeKind::Wait,
    }
}

/// The kinds of time whose waker the profile shows: the waits another
/// thread ends (a lock's holder, a condition's signaller) and sleeps (a
/// timer, or whoever interrupted them). Storage is ended by the device's
/// interrupt and a run-queue wait by the scheduler: no one to name.
pub fn shows_waker(kind: TimeKind) -> bool {
    matches!(kind, TimeKind::Lock | TimeKind::Sleep | TimeKind::Wait)
}

/// The kind of a /proc wait row: its state, wait channel and syscall.
pub fn proc_kind(state: OffState, wchan: &str, syscall: &str) -> TimeKind {
    let any = |names: &[&str]| {
        names
            .iter()
            .any(|n| wchan.contains(n) || syscall.contains(n))
    };
    match state {
        OffState::R => TimeKind::RunQueue,
        OffState::D => TimeKind::Storage,
        OffState::S if any(PROC_SLEEPS) => TimeKind::Sleep,
        _ => TimeKind::Wait,
    }
}

/// What the merge needs: both halves and how to root them.
pub struct Halves<'a> {
    /// cpu-clock samples, per thread (`Profile::threads` set).
    pub cpu: &'a Profile,
    /// Blocked time, per thread (the BPF tier), or empty.
    pub off: &'a Profile,
    /// The /proc tier's rows, when it ran instead of BPF.
    pub waits: Option<&'a WaitSamples>,
    /// One root per process, not per thread.
    pub per_process: bool,
    /// When the window began (CLOCK_MONOTONIC ns), and the length of the
    /// slices each stack's time is counted in (`WallStack::slices`).
    pub origin_ns: u64,
    pub slice_ns: u64,
}

/// Add weights seen as (CLOCK_MONOTONIC ns it ended, weight) to `slices`
/// (slice of `slice_ns` since `origin_ns` → ns): each weight covers the
/// time just before it ended (a sample its period, a block its length),
/// split where it crosses slices; time before the origin is left out.
pub fn spread(
    times: &[(u64, u64)],
    origin_ns: u64,
    slice_ns: u64,
    slices: &mut BTreeMap<u32, u64>,
) {
    let slice_ns = slice_ns.max(1);
    for &(end, weight) in times {
        let mut end = end.saturating_sub(origin_ns);
        let start = end.saturating_sub(weight);
        while end > start {
            let slice = (end - 1) / slice_ns;
            let from = (slice * slice_ns).max(start);
            *slices.entry(slice as u32).or_default() += end - from;
            end = from;
        }
    }
}

/// The merged profile's roots (largest total first), stacks (largest
/// first, `root` indexing the roots) and modules.
pub struct Merged {
    pub roots: Vec<RootTime>,
    pub stacks: Vec<WallStack>,
    pub modules: Vec<Module>,
}

/// A stack's waker, and whether it was still waiting when the profile ended.
type Woken = (Option<Waker>, bool);
type Key = (Root, TimeKind, Option<OffState>, Vec<Frame>, Woken);

/// Merge both halves into one profile in nanoseconds.
pub fn merge(h: &Halves<'_>) -> Merged {
    // Without thread ids (the /proc tier) every root is a name.
    let by_name = h.waits.is_some();
    let names = process_names(h);
    let root_of = |thread: Option<&ThreadId>, comm: &str| match thread {
        _ if by_name => Root {
            comm: comm.to_string(),
            ..Default::default()
        },
        Some(t) if h.per_process => Root {
            pid: t.pid,
            tid: 0,
            comm: names.get(&t.pid).cloned().unwrap_or_else(|| comm.into()),
        },
        Some(t) => Root {
            pid: t.pid,
            tid: t.tid,
            comm: comm.to_string(),
        },
        None => Root {
            comm: comm.to_string(),
            ..Default::default()
        },
    };

    let mut modules: Vec<Module> = h.cpu.modules.clone();
    let off_modules: Vec<u32> = h
        .off
        .modules
        .iter()
        .map(|m| match modules.iter().position(|x| x.path == m.path) {
            Some(i) => i as u32,
            None => {
                modules.push(m.clone());
                modules.len() as u32 - 1
            }
        })
        .collect();

    let mut merged: HashMap<Key, (u64, u64, BTreeMap<u32, u64>)> = HashMap::new();
    let place = |i: usize, p: &Profile, slices: &mut BTreeMap<u32, u64>| {
        if let Some(times) = p.times.get(i) {
            spread(times, h.origin_ns, h.slice_ns, slices);
        }
    };
    let mut samples: HashMap<Root, u64> = HashMap::new();
    for (i, s) in h.cpu.stacks.iter().enumerate() {
        let root = root_of(h.cpu.threads.get(i), &s.comm);
        *samples.entry(root.clone()).or_default() += s.samples;
        let e = merged
            .entry((root, TimeKind::OnCpu, None, s.frames.clone(), (None, false)))
            .or_default();
        e.0 += s.samples;
        e.1 += s.weight;
        place(i, h.cpu, &mut e.2);
    }
    for (i, s) in h.off.stacks.iter().enumerate() {
        let Some(state) = s.state else { continue };
        let remap = |frames: &[Frame]| -> Vec<Frame> {
            frames
                .iter()
                .map(|f| Frame {
                    module: f.module.and_then(|m| off_modules.get(m as usize).copied()),
                    ..f.clone()
                })
                .collect()
        };
        let frames = remap(&s.frames);
        let kind = kind_of(state, &frames);
        let waker = s
            .waker
            .as_ref()
            .filter(|_| shows_waker(kind))
            .map(|w| Waker {
                frames: remap(&w.frames),
                ..w.clone()
            });
        let ongoing = s.ongoing && shows_waker(kind);
        let root = root_of(h.off.threads.get(i), &s.comm);
        let e = merged
            .entry((root, kind, Some(state), frames, (waker, ongoing)))
            .or_default();
        e.0 += s.samples;
        e.1 += s.weight;
        place(i, h.off, &mut e.2);
    }
    for r in h.waits.iter().flat_map(|w| &w.rows) {
        let root = root_of(None, &r.comm);
        let kind = proc_kind(r.state, &r.wchan, &r.syscall);
        let e = merged
            .entry((root, kind, Some(r.state), Vec::new(), (None, false)))
            .or_default();
        e.0 += r.samples;
        e.1 += r.est_ns;
        spread(&r.times, h.origin_ns, h.slice_ns, &mut e.2);
    }

    let mut times: HashMap<Root, Times> = HashMap::new();
    for ((root, kind, ..), (_, ns, _)) in &merged {
        times.entry(root.clone()).or_default().add(*kind, *ns);
    }
    let period = 1_000_000_000 / h.cpu.freq_hz.max(1);
    let mut roots: Vec<RootTime> = times
        .into_iter()
        .map(|(root, times)| {
            let n = samples.get(&root).copied().unwrap_or(0);
            RootTime {
                cpu_error_ns: ((2.0 * (n as f64).sqrt() + 1.0) * period as f64) as u64,
                samples: n,
                root,
                times,
            }
        })
        .collect();
    roots.sort_by(|a, b| {
        b.times
            .total()
            .cmp(&a.times.total())
            .then_with(|| a.root.cmp(&b.root))
    });
    let index: HashMap<&Root, usize> = roots
        .iter()
        .enumerate()
        .map(|(i, r)| (&r.root, i))
        .collect();
    let mut stacks: Vec<WallStack> = merged
        .into_iter()
        .map(
            |((root, kind, state, frames, (waker, ongoing)), (count, ns, slices))| WallStack {
                root: index[&root],
                kind,
                state,
                frames,
                waker,
                ongoing,
                count,
                ns,
                slices: slices.into_iter().collect(),
            },
        )
        .collect();
    stacks.sort_by(|a, b| {
        b.ns.cmp(&a.ns)
            .then_with(|| a.root.cmp(&b.root))
            .then_with(|| a.kind.cmp(&b.kind))
            .then_with(|| a.frames.cmp(&b.frames))
            .then_with(|| a.waker.cmp(&b.waker))
            .then_with(|| a.ongoing.cmp(&b.ongoing))
    });
    Merged {
        roots,
        stacks,
        modules,
    }
}

/// Each process's name: its main thread's, as either half saw it.
fn process_names(h: &Halves<'_>) -> HashMap<u32, String> {
    let mut names = HashMap::new();
    for p in [h.off, h.cpu] {
        for (t, s) in p.threads.iter().zip(&p.stacks) {
            if t.pid == t.tid {
                names.entry(t.pid).or_insert_with(|| s.comm.clone());
            }
        }
    }
    names
}

/// A wall-clock profile of `merged` over `window_ns` with nothing more
/// to say than its data: no start time, cost or losses (diagnose's
/// drill-down, whose report says those of its own).
pub fn plain(
    target: String,
    merged: Merged,
    window_ns: u64,
    slice_ns: u64,
    freq_hz: u64,
    offcpu: OffcpuFrom,
) -> Wall {
    Wall {
        target,
        started: String::new(),
        started_unix_ns: 0,
        window_ns,
        slice_ns,
        event: "cpu-clock".into(),
        freq_hz,
        per_process: false,
        offcpu,
        roots: merged.roots,
        stacks: merged.stacks,
        modules: merged.modules,
        lost_samples: 0,
        lost_stacks: 0,
        lost_ends: 0,
        ended_early: None,
        cost: Default::default(),
        run_cpu_secs: 0.0,
        bpf_run_secs: None,
    }
}

/// A root's time the profile does not account for: the window less its
/// total (a thread asleep since before tracing began, or alive for part of
/// the window only), never negative.
pub fn unaccounted(r: &RootTime, window_ns: u64) -> u64 {
    window_ns.saturating_sub(r.times.total())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::offcpu::WaitRow;
    use crate::model::profile::Stack;
    use crate::model::wall::STILL_WAITING;

    fn stack(comm: &str, frames: &[Frame], state: Option<OffState>, n: u64, ns: u64) -> Stack {
        Stack {
            comm: comm.into(),
            frames: frames.to_vec(),
            samples: n,
            weight: ns,
            user_depth: 0,
            state,
            waker: None,
            ongoing: false,
        }
    }

    #[test]
    fn kinds_from_state_and_frames() {
        let k = Frame::kernel;
        let u = Frame::user;
        assert_eq!(kind_of(OffState::R, &[]), TimeKind::RunQueue);
        assert_eq!(kind_of(OffState::D, &[k("io_schedule")]), TimeKind::Storage);
        assert_eq!(
            kind_of(OffState::D, &[k("__mutex_lock.constprop.0")]),
            TimeKind::Lock
        );
        assert_eq!(
            kind_of(OffState::S, &[u("main"), k("do_nanosleep")]),
            TimeKind::Sleep
        );
        assert_eq!(
            kind_of(OffState::S, &[u("pthread_mutex_lock"), k("futex_wait")]),
            TimeKind::Lock
        );
        assert_eq!(kind_of(OffState::S, &[k("futex_wait")]), TimeKind::Wait);
        assert_eq!(
            kind_of(
                OffState::S,
                &[
                    u("std::sys::sync::mutex::futex::Mutex::lock_contended"),
                    k("futex_wait")
                ]
            ),
            TimeKind::Lock
        );
        assert_eq!(kind_of(OffState::S, &[k("pipe_read")]), TimeKind::Wait);
        assert_eq!(
            proc_kind(OffState::S, "futex_wait_queue", "futex"),
            TimeKind::Wait
        );
        assert_eq!(
            proc_kind(OffState::S, "hrtimer_nanosleep", "clock_nanosleep"),
            TimeKind::Sleep
        );
        assert_eq!(proc_kind(OffState::D, "", "pread64"), TimeKind::Storage);
    }

    #[test]
    fn both_halves_add_up_per_thread() {
        let t = |tid| ThreadId { pid: 10, tid };
        let cpu = Profile {
            freq_hz: 100,
            stacks: vec![
                stack("w", &[Frame::user("spin")], None, 100, 1_000_000_000),
                stack("m", &[Frame::user("main")], None, 1, 10_000_000),
            ],
            threads: vec![t(11), t(10)],
            ..Default::default()
        };
        let off = Profile {
            stacks: vec![
                stack(
                    "w",
                    &[Frame::kernel("do_nanosleep")],
                    Some(OffState::S),
                    1,
                    1_000_000_000,
                ),
                stack(
                    "w",
                    &[Frame::kernel("io_schedule")],
                    Some(OffState::D),
                    9,
                    900_000_000,
                ),
                stack(
                    "m",
                    &[Frame::user("__lll_lock_wait"), Frame::kernel("futex_wait")],
                    Some(OffState::S),
                    1,
                    2_800_000_000,
                ),
            ],
            threads: vec![t(11), t(11), t(10)],
            ..Default::default()
        };
        let m = merge(&Halves {
            cpu: &cpu,
            off: &off,
            waits: None,
            per_process: false,
            origin_ns: 0,
            slice_ns: 1,
        });
        assert_eq!(m.roots.len(), 2);
        let w = &m.roots[0];
        assert_eq!((w.root.tid, w.root.comm.as_str()), (11, "w"));
        assert_eq!(w.times.on_cpu, 1_000_000_000);
        assert_eq!(w.times.sleep, 1_000_000_000);
        assert_eq!(w.times.storage, 900_000_000);
        assert_eq!(w.times.total(), 2_900_000_000);
        assert_eq!(unaccounted(w, 3_000_000_000), 100_000_000);
        // 2·√100 + 1 periods of 10 ms.
        assert_eq!(w.cpu_error_ns, 210_000_000);
        assert_eq!(m.roots[1].times.lock, 2_800_000_000);
        assert!(m.stacks.windows(2).all(|s| s[0].ns >= s[1].ns));

        // Per process: one root, named for the main thread.
        let m = merge(&Halves {
            cpu: &cpu,
            off: &off,
            waits: None,
            per_process: true,
            origin_ns: 0,
            slice_ns: 1,
        });
        assert_eq!(m.roots.len(), 1);
        assert_eq!(m.roots[0].root.label(), "m [10]");
        assert_eq!(m.roots[0].times.total(), 5_710_000_000);
    }

    /// A lock wait and a storage wait of one thread, each made by `make`
    /// from its frames and state, merged: (the lock's, the storage's).
    fn lock_and_storage(make: impl Fn(&[Frame], OffState) -> Stack) -> (WallStack, WallStack) {
        let off = Profile {
            stacks: vec![
                make(
                    &[
                        Frame::user("pthread_mutex_lock"),
                        Frame::kernel("futex_wait"),
                    ],
                    OffState::S,
                ),
                make(&[Frame::kernel("io_schedule")], OffState::D),
            ],
            threads: vec![ThreadId { pid: 10, tid: 11 }; 2],
            ..Default::default()
        };
        let m = merge(&Halves {
            cpu: &Profile::default(),
            off: &off,
            waits: None,
            per_process: false,
            origin_ns: 0,
            slice_ns: 1,
        });
        let of = |kind| m.stacks.iter().find(|s| s.kind == kind).unwrap().clone();
        (of(TimeKind::Lock), of(TimeKind::Storage))
    }

    fn graph_names(s: &WallStack) -> Vec<String> {
        s.graph_frames().iter().map(|f| f.name.clone()).collect()
    }

    #[test]
    fn wakers_stay_on_waits_and_follow_the_waiter_in_the_graph() {
        let waker = Waker {
            pid: 10,
            tid: 12,
            comm: "holder".into(),
            frames: vec![
                Frame::user("unlock"),
                Frame::kernel("futex_wake"),
                Frame::kernel("try_to_wake_up"),
            ],
        };
        let (lock, storage) = lock_and_storage(|frames, state| Stack {
            waker: Some(waker.clone()),
            ..stack("w", frames, Some(state), 1, 5)
        });
        // A device's interrupt ends a storage wait: no waker to show.
        assert_eq!(storage.waker, None);
        assert_eq!(
            graph_names(&lock),
            [
                "pthread_mutex_lock",
                "futex_wait",
                "--",
                "try_to_wake_up",
                "futex_wake",
                "unlock",
                "holder [12]"
            ]
        );
        assert_eq!(lock.frames.len(), 2, "the waiter's own frames stay apart");
    }

    #[test]
    fn waits_still_going_on_are_marked_where_wakers_are_shown() {
        let (lock, storage) = lock_and_storage(|frames, state| Stack {
            ongoing: true,
            ..stack("w", frames, Some(state), 1, 5)
        });
        assert!(lock.ongoing);
        // Storage waits never show a waker, so nor its absence.
        assert!(!storage.ongoing);
        assert_eq!(
            graph_names(&lock),
            ["pthread_mutex_lock", "futex_wait", "--", STILL_WAITING]
        );
    }

    #[test]
    fn proc_rows_fill_the_off_cpu_part_by_name() {
        let origin = 1_000_000_000;
        let cpu = Profile {
            freq_hz: 100,
            stacks: vec![stack("w", &[Frame::user("spin")], None, 50, 500_000_000)],
            threads: vec![ThreadId { pid: 1, tid: 2 }],
            ..Default::default()
        };
        let waits = WaitSamples {
            sweeps: 50,
            samples: 50,
            rows: vec![WaitRow {
                times: vec![(origin + 500_000_000, 500_000_000)],
                comm: "w".into(),
                state: OffState::D,
                wchan: "io_schedule".into(),
                syscall: "pread64".into(),
                samples: 50,
                est_ns: 500_000_000,
            }],
        };
        let m = merge(&Halves {
            cpu: &cpu,
            off: &Profile::default(),
            waits: Some(&waits),
            per_process: false,
            origin_ns: origin,
            slice_ns: 100_000_000,
        });
        assert_eq!(m.roots.len(), 1);
        assert_eq!(m.roots[0].root.label(), "w");
        assert_eq!(m.roots[0].times.storage, 500_000_000);
        assert_eq!(m.roots[0].times.on_cpu, 500_000_000);
        // The samples are placed in time too: the half second before their sweep.
        let storage = m.stacks.iter().find(|s| s.kind == TimeKind::Storage);
        assert_eq!(
            storage.unwrap().slices,
            (0..5).map(|i| (i, 100_000_000)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_weight_covers_the_time_before_it_split_by_slice() {
        let mut slices = BTreeMap::new();
        // A 10 ms sample ending 25 ms in; a 1.5 s block ending at 2 s; a
        // sample from before the window, and one straddling its start.
        let ms = 1_000_000;
        let origin = 1_000 * ms;
        let times = [
            (origin + 25 * ms, 10 * ms),
            (origin + 2_000 * ms, 1_500 * ms),
            (origin - 5 * ms, 10 * ms),
            (origin + 4 * ms, 10 * ms),
        ];
        spread(&times, origin, 20 * ms, &mut slices);
        assert_eq!(
            slices[&0],
            4 * ms + 5 * ms,
            "the straddling sample's part, 15-20 ms"
        );
        assert_eq!(slices[&1], 5 * ms, "20-25 ms");
        // The block: 500 ms to 2 s, every slice of it full.
        assert!(!slices.contains_key(&24));
        assert!((25..100).all(|i| slices[&i] == 20 * ms));
        assert_eq!(slices.values().sum::<u64>(), 14 * ms + 1_500 * ms);
    }

    #[test]
    fn a_stacks_slices_add_both_threads_of_a_process() {
        let ms = 1_000_000;
        let cpu = Profile {
            freq_hz: 100,
            stacks: vec![
                stack("a", &[Frame::user("spin")], None, 1, 10 * ms),
                stack("b", &[Frame::user("spin")], None, 1, 10 * ms),
            ],
            threads: vec![ThreadId { pid: 1, tid: 1 }, ThreadId { pid: 1, tid: 2 }],
            times: vec![vec![(110 * ms, 10 * ms)], vec![(215 * ms, 10 * ms)]],
            ..Default::default()
        };
        let m = merge(&Halves {
            cpu: &cpu,
            off: &Profile::default(),
            waits: None,
            per_process: true,
            origin_ns: 100 * ms,
            slice_ns: 50 * ms,
        });
        assert_eq!(m.stacks.len(), 1);
        assert_eq!(m.stacks[0].slices, vec![(0, 10 * ms), (2, 10 * ms)]);
    }
}
