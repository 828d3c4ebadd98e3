//! Thread-state analysis (Brendan Gregg's TSA) of an observation: the
//! thread time of the window split into states, amounts from counters
//! (on-CPU from utime+stime, run-queue delay from schedstat, block-I/O
//! delay from delay accounting when on) and the off-CPU rest split by
//! where sampled threads waited; and whether the work came in bursts.

use std::collections::BTreeMap;

use crate::analysis::waits;
use crate::model::diagnosis::{Observation, Periodic, StateShare, ThreadState};

/// The thread time split into states.
pub struct Budget {
    /// Every state with time in it, largest first.
    pub states: Vec<StateShare>,
    /// Off-CPU samples per state, by reason ("timer", "mutex (futex)").
    pub reasons: BTreeMap<ThreadState, BTreeMap<&'static str, u64>>,
    /// Off-CPU samples in all.
    pub off_samples: u64,
    /// Thread-seconds in the window (the whole budget).
    pub total_s: f64,
    /// Thread-seconds not sleeping by design.
    pub working_s: f64,
    /// Kernel CPU time counted as storage, not CPU: page faults reading
    /// the page cache back from storage (`fault_reads`).
    pub fault_cpu_s: f64,
}

impl Budget {
    pub fn seconds(&self, s: ThreadState) -> f64 {
        self.states
            .iter()
            .find(|x| x.state == s)
            .map_or(0.0, |x| x.seconds)
    }

    pub fn working_share(&self, s: ThreadState) -> f64 {
        self.states
            .iter()
            .find(|x| x.state == s)
            .map_or(0.0, |x| x.working_share)
    }
}

/// Swap came back in during the window: the anonymous memory swapped out
/// went down at some point.
pub fn swapped_in(o: &Observation) -> bool {
    o.memory
        .series
        .windows(2)
        .any(|w| w[1].swap_kib < w[0].swap_kib)
}

/// Kernel time one page fault may cost at most: its page allocations,
/// the readahead it submits, the mapping. Bounds what `fault_reads` takes
/// from the CPU time, so faults beside other kernel work take only theirs.
pub const FAULT_CPU_MAX_S: f64 = 50e-6;

/// The kernel CPU time spent faulting file pages in from storage: with
/// storage reads in the window and faults that read (major faults, or
/// threads seen waiting in a fault for a page being read; readahead makes
/// most such faults minor), and not swap coming back (`Paging`): the
/// kernel time up to FAULT_CPU_MAX_S per fault. A file read through mmap
/// does its I/O in page faults, whose handling is part of the read.
/// Not under a memory cgroup that reclaimed in the window: its faults'
/// kernel time is then mostly reclaim, work on the CPU (the refaults'
/// reads are waits, and sampled as such).
pub fn fault_reads(o: &Observation, fault_waits: bool) -> f64 {
    let t = &o.totals;
    if !(t.major_faults > 0 || fault_waits)
        || t.read_bytes.unwrap_or(0) == 0
        || swapped_in(o)
        || reclaimed(o)
    {
        return 0.0;
    }
    let faults = t.major_faults + t.minor_faults;
    t.system_s.min(faults as f64 * FAULT_CPU_MAX_S)
}

/// A memory cgroup of the target hit its limit (or went over memory.high)
/// in the window: the kernel reclaimed for it.
pub fn reclaimed(o: &Observation) -> bool {
    o.limits
        .cgroups
        .iter()
        .filter_map(|c| c.memory.as_ref())
        .any(|m| m.failcnt + m.max_events + m.high_events > 0)
}

/// Of all thread samples, the share that must show a thread able to hold
/// a lock (running, runnable, or waiting for something other than a
/// runtime's lock or by design) for runtime lock waits to be lock time.
pub const HOLDER_MIN: f64 = 0.02;

/// CPUs a target waiting only for events may use (its timers, a wakeup);
/// more is the work of threads handing a lock over.
pub const EVENT_CPU_MAX: f64 = 0.01;

/// Whether no thread of the target could have held the runtime locks its
/// threads waited for, where those locks are ones the runtime also waits
/// for events in (locks::Pattern::event). The stacks name the call, not
/// who holds it: `Thread.join()`, `queue.get()` and an idle pool wait in
/// the very same `PyThread_acquire_lock` as a contended lock. Such a lock
/// is held by a thread that works; when every other thread sleeps by
/// design (a timer, input) or waits the same way, the waits are for an
/// event, and sleeping by design too. A monitor, a row lock or a mutex
/// stays a lock whoever holds it (another backend, a thread asleep inside
/// `synchronized`); the GIL is released by every blocked thread.
pub fn no_holder(o: &Observation) -> bool {
    let all: u64 = o.samples.iter().map(|s| s.count).sum();
    let runtime: u64 = o
        .samples
        .iter()
        .filter(|s| s.on == waits::RUNTIME_LOCK)
        .map(|s| s.count)
        .sum();
    // Threads that take turns at a lock use CPU at every hand-over, even
    // when the holder sleeps inside it and no sample caught one running.
    let busy = o.cpu_s() >= EVENT_CPU_MAX * o.window_s;
    if runtime == 0 || busy || !crate::analysis::locks::only_event_locks(o) {
        return false;
    }
    let holders: u64 = o
        .samples
        .iter()
        .filter(|s| s.on != waits::RUNTIME_LOCK)
        .filter(|s| {
            s.state == 'R'
                || waits::classify(s.state, &s.wchan, &s.syscall, &s.on).state
                    != ThreadState::Sleeping
        })
        .map(|s| s.count)
        .sum();
    (holders as f64) < HOLDER_MIN * all as f64
}

pub fn budget(o: &Observation) -> Budget {
    use ThreadState::*;
    // A parent that vforks waits for a CPU behind its own short-lived
    // children (the child wakes it at exec, then runs on): that wait is
    // the children's CPU, already in the budget below, not competition.
    // A fork()ing parent's run-queue time stays its own.
    let vforks = o
        .samples
        .iter()
        .any(|s| s.state != 'R' && matches!(s.syscall.as_str(), "vfork" | "clone" | "clone3"));
    let behind_children = if vforks {
        o.totals.unseen_children_cpu_s
    } else {
        0.0
    };
    let rq = (o.totals.run_delay_s.unwrap_or(0.0) - behind_children).max(0.0);
    // Short-lived children lived at least their CPU time.
    let total = (o.totals.thread_s + o.totals.unseen_children_cpu_s).max(o.cpu_s() + rq);
    let off = (total - o.cpu_s() - rq).max(0.0);
    let paging = swapped_in(o);
    let mut reasons: BTreeMap<ThreadState, BTreeMap<&'static str, u64>> = BTreeMap::new();
    let mut off_samples = 0;
    let unheld = no_holder(o);
    for s in o.samples.iter().filter(|s| s.state != 'R') {
        let mut w = waits::classify(s.state, &s.wchan, &s.syscall, &s.on);
        if paging && w.why == "page fault" {
            w.state = Paging;
        }
        if unheld && s.on == waits::RUNTIME_LOCK {
            w = waits::Wait {
                state: Sleeping,
                why: "an event (a lock no working thread held)",
            };
        }
        *reasons
            .entry(w.state)
            .or_default()
            .entry(w.why)
            .or_default() += s.count;
        off_samples += s.count;
    }
    let fault_waits = reasons
        .get(&Storage)
        .is_some_and(|r| r.contains_key("page fault"));
    let fault_cpu = fault_reads(o, fault_waits);
    let on = o.cpu_s() - fault_cpu;
    let mut secs: BTreeMap<ThreadState, f64> = BTreeMap::new();
    secs.insert(OnCpu, on);
    secs.insert(RunQueue, rq);
    secs.insert(Storage, fault_cpu);
    let runnable_samples: u64 = o
        .samples
        .iter()
        .filter(|s| s.state == 'R')
        .map(|s| s.count)
        .sum();
    if off_samples == 0 && runnable_samples > 0 {
        // Off CPU yet always seen runnable: held off by a throttled cgroup.
        // Kernels that dequeue a throttled thread (6.18) or run a loaded VM
        // leave that time out of run_delay; it is still waiting for a CPU.
        secs.insert(RunQueue, rq + off);
    } else if off_samples == 0 {
        // Off CPU, but never caught there.
        secs.insert(Other, off);
    } else {
        for (state, why) in &reasons {
            let n: u64 = why.values().sum();
            *secs.entry(*state).or_default() += off * n as f64 / off_samples as f64;
        }
    }
    // Delay accounting measures storage waits; samples only estimate them.
    if let Some(blk) = o.totals.blkio_delay_s {
        let sampled = secs.get(&Storage).copied().unwrap_or(0.0) - fault_cpu;
        let measured = blk.min(off);
        if measured > sampled {
            let rest = off - sampled;
            let scale = if rest > 0.0 {
                (off - measured) / rest
            } else {
                0.0
            };
            for (state, v) in secs.iter_mut() {
                if !matches!(state, OnCpu | RunQueue | Storage) {
                    *v *= scale;
                }
            }
            secs.insert(Storage, measured + fault_cpu);
        }
    }
    let sleeping = secs.get(&Sleeping).copied().unwrap_or(0.0);
    let working = (total - sleeping).max(0.0);
    let mut states: Vec<StateShare> = secs
        .into_iter()
        .filter(|(_, v)| *v > 0.0)
        .map(|(state, seconds)| StateShare {
            state,
            seconds,
            share: if total > 0.0 { seconds / total } else { 0.0 },
            working_share: if state == Sleeping || working <= 0.0 {
                0.0
            } else {
                seconds / working
            },
        })
        .collect();
    states.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    Budget {
        states,
        reasons,
        off_samples,
        total_s: total,
        working_s: working,
        fault_cpu_s: fault_cpu,
    }
}

/// Buckets a burst or a pause must last on average to count (0.3 s).
const MIN_RUN: f64 = 3.0;

/// Bursts of work separated by pauses, from the working-threads series
/// (`bucket_s` per value): a two-level signal whose high runs and low runs
/// both last, that rises at least twice within the window (two cycles, so
/// one-off steps do not count), at a regular pace.
pub fn periodic(busy: &[f64], bucket_s: f64) -> Option<Periodic> {
    if busy.len() < 10 {
        return None;
    }
    let peak = busy.iter().copied().fold(0.0, f64::max);
    if peak < 0.2 {
        return None;
    }
    let high: Vec<bool> = busy.iter().map(|&b| b >= peak / 2.0).collect();
    // Runs as (start, length, high).
    let mut runs: Vec<(usize, usize, bool)> = Vec::new();
    for (i, &h) in high.iter().enumerate() {
        match runs.last_mut() {
            Some(r) if r.2 == h => r.1 += 1,
            _ => runs.push((i, 1, h)),
        }
    }
    let mean_len = |h: bool| {
        let v: Vec<usize> = runs.iter().filter(|r| r.2 == h).map(|r| r.1).collect();
        v.iter().sum::<usize>() as f64 / v.len().max(1) as f64
    };
    if mean_len(true) < MIN_RUN || mean_len(false) < MIN_RUN {
        return None;
    }
    let mean = |h: bool| {
        let v: Vec<f64> = busy
            .iter()
            .zip(&high)
            .filter(|(_, x)| **x == h)
            .map(|(b, _)| *b)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    if mean(true) < 3.0 * mean(false) + 0.05 {
        return None;
    }
    // Rising edges seen in the window, and their spacing.
    let rises: Vec<usize> = runs
        .iter()
        .filter(|r| r.2 && r.0 > 0)
        .map(|r| r.0)
        .collect();
    if rises.len() < 2 {
        return None;
    }
    let gaps: Vec<usize> = rises.windows(2).map(|w| w[1] - w[0]).collect();
    let (lo, hi) = (
        *gaps.iter().min().expect("two rises"),
        *gaps.iter().max().expect("two rises"),
    );
    if hi > 2 * lo {
        return None;
    }
    // Whole bursts (not cut by the window's edges) give the length.
    let n = busy.len();
    let whole: Vec<usize> = runs
        .iter()
        .filter(|r| r.2 && r.0 > 0 && r.0 + r.1 < n)
        .map(|r| r.1)
        .collect();
    let burst = if whole.is_empty() {
        mean_len(true)
    } else {
        whole.iter().sum::<usize>() as f64 / whole.len() as f64
    };
    let period = gaps.iter().sum::<usize>() as f64 / gaps.len() as f64;
    Some(Periodic {
        busy_share: high.iter().filter(|&&h| h).count() as f64 / n as f64,
        burst_s: burst * bucket_s,
        period_s: Some(period * bucket_s),
    })
}

/// Average working threads during the bursts (the high buckets).
pub fn burst_level(busy: &[f64]) -> f64 {
    let peak = busy.iter().copied().fold(0.0, f64::max);
    let v: Vec<f64> = busy.iter().copied().filter(|&b| b >= peak / 2.0).collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::diagnosis::Totals;

    fn obs(thread_s: f64, user: f64, rq: Option<f64>) -> Observation {
        Observation {
            window_s: thread_s,
            totals: Totals {
                user_s: user,
                run_delay_s: rq,
                thread_s,
                threads: 1,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// Two threads in one runtime wait of `kind` all window, with `cpu`
    /// seconds of CPU in 5 s.
    fn waiting_in(kind: &str, cpu: f64) -> Observation {
        let mut o = obs(5.0, cpu, Some(0.0));
        o.sample('S', "", "futex", crate::analysis::waits::RUNTIME_LOCK, 500);
        o.runtime_locks.push(crate::model::locks::RuntimeLock {
            kind: kind.into(),
            lock: true,
            share: 1.0,
            ..Default::default()
        });
        o
    }

    #[test]
    fn only_an_event_lock_nobody_works_behind_is_an_event() {
        // Thread.join, queue.get, an idle pool: nothing works, nothing runs.
        assert!(no_holder(&waiting_in("a threading lock", 0.0)));
        assert!(no_holder(&waiting_in("a semaphore", 0.01)));
        // Hand-overs of a lock held across a sleep use CPU.
        assert!(!no_holder(&waiting_in("a threading lock", 0.15)));
        // A monitor or a row lock is held by someone, seen or not.
        assert!(!no_holder(&waiting_in("a monitor (synchronized)", 0.0)));
        assert!(!no_holder(&waiting_in(
            "a heavyweight lock (row or table)",
            0.0
        )));
    }

    #[test]
    fn counters_give_cpu_and_queue_samples_split_the_rest() {
        let mut o = obs(5.0, 2.0, Some(1.0));
        o.sample('S', "futex_do_wait", "futex", "mutex", 30);
        o.sample('S', "hrtimer_nanosleep", "clock_nanosleep", "", 10);
        o.sample('R', "", "", "", 60);
        let b = budget(&o);
        assert_eq!(b.seconds(ThreadState::OnCpu), 2.0);
        assert_eq!(b.seconds(ThreadState::RunQueue), 1.0);
        assert!((b.seconds(ThreadState::Lock) - 1.5).abs() < 1e-9);
        assert!((b.seconds(ThreadState::Sleeping) - 0.5).abs() < 1e-9);
        assert!((b.working_s - 4.5).abs() < 1e-9);
        assert_eq!(b.states[0].state, ThreadState::OnCpu);
        assert!((b.working_share(ThreadState::Lock) - 1.5 / 4.5).abs() < 1e-9);
    }

    #[test]
    fn delay_accounting_replaces_the_storage_estimate() {
        let mut o = obs(4.0, 1.0, Some(0.0));
        o.sample('D', "folio_wait_bit_common", "read", "file", 10);
        o.sample('S', "hrtimer_nanosleep", "nanosleep", "", 10);
        o.totals.blkio_delay_s = Some(2.4);
        let b = budget(&o);
        assert!((b.seconds(ThreadState::Storage) - 2.4).abs() < 1e-9);
        assert!((b.seconds(ThreadState::Sleeping) - 0.6).abs() < 1e-9);
    }

    #[test]
    fn faults_while_swap_comes_back_are_paging() {
        use crate::model::diagnosis::MemoryPoint;
        let mut o = obs(2.0, 0.2, Some(0.0));
        o.sample('D', "folio_wait_bit_common", "fault", "", 10);
        assert!(budget(&o).seconds(ThreadState::Storage) > 1.7);
        o.memory.series = vec![
            MemoryPoint {
                swap_kib: 5000,
                ..Default::default()
            },
            MemoryPoint {
                swap_kib: 3000,
                ..Default::default()
            },
        ];
        assert!(budget(&o).seconds(ThreadState::Paging) > 1.7);
    }

    #[test]
    fn kernel_time_faulting_file_pages_in_is_storage() {
        let mut o = obs(2.0, 0.1, Some(0.0));
        o.totals.system_s = 0.9;
        o.totals.major_faults = 10;
        o.totals.minor_faults = 9990;
        o.totals.read_bytes = Some(100 << 20);
        o.sample('D', "folio_wait_bit_common", "fault", "", 10);
        let b = budget(&o);
        // 10000 faults take at most 0.5 s of the 0.9 s in the kernel.
        assert!((b.fault_cpu_s - 0.5).abs() < 1e-9);
        assert!((b.seconds(ThreadState::OnCpu) - 0.5).abs() < 1e-9);
        assert!((b.seconds(ThreadState::Storage) - 1.5).abs() < 1e-9);
        // Without storage reads the faults were not reads from storage.
        o.totals.read_bytes = Some(0);
        assert_eq!(budget(&o).fault_cpu_s, 0.0);
        assert!((budget(&o).seconds(ThreadState::OnCpu) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn reclaim_under_a_memory_limit_is_cpu_not_storage() {
        use crate::model::limits::{CgroupLimits, MemoryLimit};
        let mut o = obs(2.0, 0.1, Some(0.0));
        o.totals.system_s = 0.9;
        o.totals.major_faults = 10;
        o.totals.minor_faults = 9990;
        o.totals.read_bytes = Some(100 << 20);
        o.sample('D', "folio_wait_bit_common", "fault", "", 10);
        o.limits.cgroups = vec![CgroupLimits {
            memory: Some(MemoryLimit {
                max: Some(48 << 20),
                failcnt: 1000,
                ..Default::default()
            }),
            ..Default::default()
        }];
        let b = budget(&o);
        assert_eq!(b.fault_cpu_s, 0.0);
        assert!((b.seconds(ThreadState::OnCpu) - 1.0).abs() < 1e-9);
        assert!((b.seconds(ThreadState::Storage) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn bursts_of_a_second_every_two() {
        // 1 s busy, 1 s idle, for 5 s, in 100 ms buckets, a little noise.
        let busy: Vec<f64> = (0..50)
            .map(|i| {
                if (i / 10) % 2 == 0 {
                    0.9 + (i % 3) as f64 * 0.05
                } else {
                    0.02
                }
            })
            .collect();
        let p = periodic(&busy, 0.1).expect("periodic");
        assert!((p.burst_s - 1.0).abs() < 0.15, "{p:?}");
        assert!((p.period_s.unwrap() - 2.0).abs() < 0.15, "{p:?}");
        assert!((p.busy_share - 0.6).abs() < 0.11, "{p:?}");
        assert!(burst_level(&busy) > 0.85);
    }

    #[test]
    fn steady_or_noisy_work_is_not_periodic() {
        let steady = vec![1.0; 50];
        assert_eq!(periodic(&steady, 0.1), None);
        let flicker: Vec<f64> = (0..50).map(|i| (i % 2) as f64).collect();
        assert_eq!(periodic(&flicker, 0.1), None, "10 ms flicker is not bursts");
        let idle = vec![0.01; 50];
        assert_eq!(periodic(&idle, 0.1), None);
        // Two one-off allocations, at 0 s and 1 s, then quiet.
        let steps: Vec<f64> = (0..30)
            .map(|i| {
                if i < 4 || (10..14).contains(&i) {
                    1.0
                } else {
                    0.0
                }
            })
            .collect();
        assert_eq!(periodic(&steps, 0.1), None, "one rise is not a cycle");
    }
}
