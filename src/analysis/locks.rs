//! Locks by what holds them: blocked threads' user stacks matched against
//! a table of the ways runtimes wait (the CPython GIL, JVM monitors and
//! parking, Go's runtime locks and semaphores, PostgreSQL's lock sleeps,
//! glibc's mutexes, rwlocks, semaphores and condition variables). A
//! futex wait alone cannot tell a lock from a condition; the stack can.
//! The table is data: a runtime added is a row added. Pure.

use std::collections::HashMap;

use crate::analysis::runtimes;
use crate::analysis::waits::RUNTIME_LOCK;
use crate::model::diagnosis::Observation;
use crate::model::locks::{LOCK_CALLS, RuntimeLock};
use crate::model::profile::{Frame, Profile, WeightUnit};
use crate::model::verdict::LockSeen;

/// One way of waiting: a stack with a frame named `inner` (and, when
/// given, a frame named `outer` at most three frames further out) waits
/// for `kind` of `runtime`, taken by `function`. Names match as
/// substrings (C++ names carry their arguments, glibc's have aliases
/// with underscores).
#[derive(Debug, Clone, Copy)]
pub struct Pattern {
    pub inner: &'static str,
    pub outer: Option<&'static str>,
    pub runtime: &'static str,
    pub kind: &'static str,
    pub function: &'static str,
    /// A lock (false: a condition, sleeping by design).
    pub lock: bool,
    /// A lock the runtime also waits for events in (CPython's
    /// `Thread.join()`, `queue.get()`, an idle pool and its timers all
    /// wait in a threading lock): a lock only while a thread of the
    /// target could hold it (tsa::no_holder). A monitor, a row lock, a
    /// mutex is contended whoever holds it.
    pub event: bool,
    /// A lock of tasks the runtime runs on few threads (goroutines): a
    /// thread parks only when no task is left to run, so its waits are
    /// the parallelism the lock cost, not every waiter's time.
    pub multiplexed: bool,
}

const fn lock(inner: &'static str, runtime: &'static str, kind: &'static str) -> Pattern {
    Pattern {
        inner,
        outer: None,
        runtime,
        kind,
        function: inner,
        lock: true,
        event: false,
        multiplexed: false,
    }
}

/// A lock of goroutines (`Pattern::multiplexed`).
const fn goroutine_lock(inner: &'static str, kind: &'static str) -> Pattern {
    Pattern {
        multiplexed: true,
        ..lock(inner, "Go", kind)
    }
}

/// A lock the runtime also waits for events in (`Pattern::event`).
const fn event_lock(inner: &'static str, runtime: &'static str, kind: &'static str) -> Pattern {
    Pattern {
        event: true,
        ..lock(inner, runtime, kind)
    }
}

/// A wait that is not a lock (a condition, a worker idle for work), named
/// by `function`.
const fn wait(
    inner: &'static str,
    runtime: &'static str,
    kind: &'static str,
    function: &'static str,
) -> Pattern {
    Pattern {
        inner,
        outer: None,
        runtime,
        kind,
        function,
        lock: false,
        event: false,
        multiplexed: false,
    }
}

/// A stripped CPython's GIL wait: its timed condition wait under `outer`.
const fn gil_under(outer: &'static str) -> Pattern {
    Pattern {
        inner: "pthread_cond_timedwait",
        outer: Some(outer),
        runtime: "CPython",
        kind: "the GIL",
        function: "take_gil",
        lock: true,
        event: false,
        multiplexed: false,
    }
}

/// The table, most specific first: a runtime's lock is recognised before
/// the glibc call it waits in.
pub const PATTERNS: &[Pattern] = &[
    // CPython ≤ 3.12: the GIL is a condition variable and a mutex.
    lock("take_gil", "CPython", "the GIL"),
    // A stripped CPython names no take_gil: the interpreter's own timed
    // condition waits under the calls that take the GIL back are GIL
    // waits (Python-level locks wait in sem_wait instead).
    gil_under("PyEval_RestoreThread"),
    gil_under("_PyEval_EvalFrameDefault"),
    gil_under("PyEval_AcquireThread"),
    event_lock("PyThread_acquire_lock", "CPython", "a threading lock"),
    // HotSpot: BLOCKED on `synchronized`, and java.util.concurrent.
    lock("ObjectMonitor::enter", "JVM", "a monitor (synchronized)"),
    lock("ObjectMonitor::EnterI", "JVM", "a monitor (synchronized)"),
    wait(
        "ObjectMonitor::wait",
        "JVM",
        "Object.wait (a condition)",
        "ObjectMonitor::wait",
    ),
    lock(
        "Parker::park",
        "JVM",
        "LockSupport.park (a java.util.concurrent lock)",
    ),
    // The JVM's own workers (GC, JIT) wait for work on semaphores.
    wait(
        "PosixSemaphore::wait",
        "JVM",
        "a worker waiting for work",
        "PosixSemaphore::wait",
    ),
    // PostgreSQL: heavyweight locks sleep in ProcSleep, lightweight ones
    // in PGSemaphoreLock.
    lock(
        "ProcSleep",
        "PostgreSQL",
        "a heavyweight lock (row or table)",
    ),
    lock(
        "PGSemaphoreLock",
        "PostgreSQL",
        "a lightweight lock (semaphore)",
    ),
    // Go: sync.Mutex's semaphore parks the goroutine, and its thread only
    // when no other goroutine can run; the runtime's own locks park threads.
    goroutine_lock("sync.(*Mutex).lockSlow", "a sync.Mutex"),
    goroutine_lock("sync.(*RWMutex)", "a sync.RWMutex"),
    goroutine_lock("runtime.semacquire", "a semaphore (semacquire)"),
    lock("runtime.lock", "Go", "a runtime lock"),
    // glibc.
    lock("pthread_mutex_lock", "glibc", "a mutex"),
    lock("pthread_mutex_timedlock", "glibc", "a mutex"),
    lock("__lll_lock_wait", "glibc", "a mutex"),
    lock("pthread_rwlock_rdlock", "glibc", "a rwlock (read)"),
    lock("pthread_rwlock_wrlock", "glibc", "a rwlock (write)"),
    // A semaphore is how threads signal events (and CPython's threading
    // lock waits in one: a stack cut off in libc ends here).
    event_lock("sem_wait", "glibc", "a semaphore"),
    event_lock("sem_timedwait", "glibc", "a semaphore"),
    event_lock("sem_clockwait", "glibc", "a semaphore"),
    lock("semop", "glibc", "a System V semaphore"),
    lock("semtimedop", "glibc", "a System V semaphore"),
    wait(
        "pthread_cond_",
        "glibc",
        "a condition variable",
        "pthread_cond_wait",
    ),
];

/// Whether every lock the observation's stacks waited for is one its
/// runtime also waits for events in (`Pattern::event`).
pub fn only_event_locks(o: &Observation) -> bool {
    let event = |kind: &str| PATTERNS.iter().any(|p| p.kind == kind && p.event);
    o.runtime_locks
        .iter()
        .filter(|l| l.lock)
        .all(|l| event(&l.kind))
}

/// Whether the lock the observation's stacks waited for most is one of
/// tasks its runtime multiplexes on threads (`Pattern::multiplexed`).
pub fn multiplexed(o: &Observation) -> bool {
    let multiplexed = |kind: &str| PATTERNS.iter().any(|p| p.kind == kind && p.multiplexed);
    o.runtime_locks
        .iter()
        .filter(|l| l.lock)
        .max_by_key(|l| l.samples)
        .is_some_and(|l| multiplexed(&l.kind))
}

/// Threads seen waiting on futexes or semaphores this share of the
/// samples or more: their stacks are worth reading after the verdict.
pub const WORTH_A_LOOK: f64 = 0.1;

/// Whether the observation's threads waited enough in the calls a lock
/// waits in for their stacks to matter (a runtime's lock may hide there).
pub fn worth_a_look(o: &Observation) -> bool {
    let all: u64 = o.samples.iter().map(|s| s.count).sum();
    let waits: u64 = o
        .samples
        .iter()
        .filter(|s| LOCK_CALLS.contains(&s.syscall.as_str()))
        .map(|s| s.count)
        .sum();
    all > 0 && waits as f64 >= WORTH_A_LOOK * all as f64
}

/// The system call an off-CPU stack waits in, from its kernel entry frame
/// (`__x64_sys_futex`); None for a stack without kernel frames.
pub fn call_of(frames: &[Frame]) -> Option<&str> {
    const ENTRIES: &[&str] = &["__x64_sys_", "__arm64_sys_", "__se_sys_", "__do_sys_"];
    frames
        .iter()
        .filter(|f| f.kernel)
        .find_map(|f| ENTRIES.iter().find_map(|e| f.name.strip_prefix(e)))
}

/// How far out `outer` may be from `inner`.
const OUTER_WITHIN: usize = 3;

/// The pattern a stack (outermost first) waits in, and where its inner
/// frame is.
pub fn matching(frames: &[Frame]) -> Option<(&'static Pattern, usize)> {
    PATTERNS.iter().find_map(|p| {
        let i = frames
            .iter()
            .rposition(|f| !f.kernel && f.name.contains(p.inner))?;
        let Some(outer) = p.outer else {
            return Some((p, i));
        };
        let from = i.saturating_sub(OUTER_WITHIN);
        frames[from..i]
            .iter()
            .any(|f| f.name.contains(outer))
            .then_some((p, i))
    })
}

/// A frame with a name (not `[unknown]`, not `module+0xOFFSET`).
fn named(f: &Frame) -> bool {
    !f.kernel && !f.name.starts_with('[') && !f.name.contains("+0x")
}

/// What the stacks of `p` waited in, of `total` in all (thread samples
/// for the sweep's profile, one sample per thread seen waiting, per sweep;
/// thread-nanoseconds for an off-CPU profile, whose stacks weigh the time
/// blocked), in `call` (None: each stack's own kernel entry): each kind
/// once per call, most first. Stacks no pattern matches are left out.
pub fn attribute(p: &Profile, total: u64, call: Option<&str>) -> Vec<RuntimeLock> {
    type Key = (
        &'static str,
        &'static str,
        &'static str,
        Option<String>,
        String,
    );
    // Blocked time or counted events weigh by the weight; samples by the samples.
    let by_weight = p.unit != WeightUnit::Samples;
    let mut by: HashMap<Key, (u64, u64, u64, Vec<String>)> = HashMap::new();
    for s in &p.stacks {
        let Some((pat, i)) = matching(&s.frames) else {
            continue;
        };
        // A JVM's lock is taken in Java code, named when its perf map is.
        let java = (pat.runtime == "JVM").then(|| runtimes::java_caller(&s.frames[..i]));
        let caller = java.flatten().or_else(|| {
            s.frames[..i]
                .iter()
                .rev()
                .find(|f| named(f) && !PATTERNS.iter().any(|q| f.name.contains(q.inner)))
                .map(|f| f.name.clone())
        });
        let call = call.or_else(|| call_of(&s.frames)).unwrap_or_default();
        let e = by
            .entry((pat.runtime, pat.kind, pat.function, caller, call.into()))
            .or_default();
        e.0 += s.samples;
        e.1 += if by_weight { s.weight } else { s.samples };
        if s.samples > e.2 {
            e.2 = s.samples;
            e.3 = s.frames.iter().map(|f| f.name.clone()).collect();
        }
    }
    let lock_of = |kind: &str| PATTERNS.iter().any(|p| p.kind == kind && p.lock);
    let mut v: Vec<RuntimeLock> = by
        .into_iter()
        .map(
            |((runtime, kind, function, caller, call), (n, weight, _, stack))| RuntimeLock {
                runtime: runtime.into(),
                kind: kind.into(),
                lock: lock_of(kind),
                function: function.into(),
                caller,
                call,
                samples: n,
                share: weight as f64 / total.max(1) as f64,
                stack,
            },
        )
        .collect();
    v.sort_by(|a, b| {
        b.share
            .total_cmp(&a.share)
            .then(b.samples.cmp(&a.samples))
            .then(a.kind.cmp(&b.kind))
            .then(a.call.cmp(&b.call))
    });
    v
}

/// The share of the thread time `locks` saw waiting for a lock.
pub fn lock_share(locks: &[RuntimeLock]) -> f64 {
    locks.iter().filter(|l| l.lock).map(|l| l.share).sum()
}

/// Count as lock waits the share of the observation's waits that the
/// stacks showed waiting for a runtime's lock (they were "condition
/// (futex)" or "events (poll)", sleeping by design), call by call.
/// Returns whether any moved.
pub fn relabel(o: &mut Observation, locks: &[RuntimeLock]) -> bool {
    let all: u64 = o.samples.iter().map(|s| s.count).sum();
    let mut calls: Vec<&str> = locks
        .iter()
        .filter(|l| l.lock)
        .map(|l| l.call.as_str())
        .collect();
    calls.sort();
    calls.dedup();
    let mut moved_any = false;
    for call in calls {
        let share: f64 = locks
            .iter()
            .filter(|l| l.lock && l.call == call)
            .map(|l| l.share)
            .sum();
        // A lock seen in no known call: the futex and semaphore waits.
        let waits = |s: &crate::model::diagnosis::ThreadSamples| {
            let in_call = if call.is_empty() {
                matches!(
                    s.syscall.as_str(),
                    "futex" | "futex_waitv" | "semop" | "semtimedop"
                )
            } else {
                s.syscall == call
            };
            in_call && s.state != 'R' && s.on != "mutex" && s.on != RUNTIME_LOCK
        };
        let n: u64 = o.samples.iter().filter(|s| waits(s)).map(|s| s.count).sum();
        if share <= 0.0 || n == 0 || all == 0 {
            continue;
        }
        // The stacks were sampled in another window: the same share of the
        // thread time, at most every wait in that call.
        let moved = (share / (n as f64 / all as f64)).min(1.0);
        let mut out = Vec::new();
        for s in std::mem::take(&mut o.samples) {
            if !waits(&s) {
                out.push(s);
                continue;
            }
            let n = (s.count as f64 * moved).round() as u64;
            if n > 0 {
                let mut l = s.clone();
                l.on = RUNTIME_LOCK.into();
                l.count = n;
                out.push(l);
                moved_any = true;
            }
            if s.count > n {
                let mut rest = s;
                rest.count -= n;
                out.push(rest);
            }
        }
        out.sort_by(|a, b| b.count.cmp(&a.count).then(a.cmp(b)));
        o.samples = out;
    }
    moved_any
}

/// The runtime's lock waited for most, and the share of the thread time
/// spent waiting for it (all its waits of that runtime and kind).
pub fn seen(o: &Observation) -> Option<LockSeen> {
    let l = o.runtime_locks.iter().find(|l| l.lock)?;
    let share: f64 = o
        .runtime_locks
        .iter()
        .filter(|k| k.runtime == l.runtime && k.kind == l.kind)
        .map(|k| k.share)
        .sum();
    Some(LockSeen::Runtime {
        runtime: l.runtime.clone(),
        kind: l.kind.clone(),
        function: l.function.clone(),
        caller: l.caller.clone(),
        share,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(names: &[&str]) -> Vec<Frame> {
        names.iter().map(|n| Frame::user(*n)).collect()
    }

    fn kind(names: &[&str]) -> Option<&'static str> {
        matching(&stack(names)).map(|(p, _)| p.kind)
    }

    #[test]
    fn a_lock_is_relabelled_in_the_call_it_was_seen_in() {
        let mut frames = stack(&["PostgresMain", "LockAcquireExtended", "ProcSleep"]);
        frames.push(Frame {
            name: "__x64_sys_epoll_wait".into(),
            kernel: true,
            module: None,
        });
        assert_eq!(call_of(&frames), Some("epoll_wait"));
        assert_eq!(call_of(&stack(&["main"])), None);
        let l = RuntimeLock {
            runtime: "PostgreSQL".into(),
            kind: "a heavyweight lock (row or table)".into(),
            lock: true,
            call: "epoll_wait".into(),
            share: 0.25,
            ..Default::default()
        };
        let mut o = Observation::default();
        o.sample('S', "", "epoll_wait", "", 50);
        o.sample('S', "", "futex", "futex", 50);
        assert!(relabel(&mut o, &[l]));
        let lock: u64 = o
            .samples
            .iter()
            .filter(|s| s.on == RUNTIME_LOCK)
            .map(|s| s.count)
            .sum();
        // A quarter of all the samples, all in epoll_wait; the futex
        // waits stay conditions.
        assert_eq!(lock, 25);
        assert!(
            o.samples
                .iter()
                .filter(|s| s.on == RUNTIME_LOCK)
                .all(|s| s.syscall == "epoll_wait")
        );
    }

    #[test]
    fn each_runtime_by_its_stack() {
        assert_eq!(
            kind(&[
                "_PyEval_EvalFrameDefault",
                "take_gil",
                "pthread_cond_timedwait@@GLIBC_2.3.2"
            ]),
            Some("the GIL")
        );
        // Stripped CPython: the interpreter's timed wait under RestoreThread.
        assert_eq!(
            kind(&[
                "PyEval_RestoreThread",
                "python3.11+0x2a6f1b",
                "___pthread_cond_timedwait",
                "__futex_abstimed_wait_common"
            ]),
            Some("the GIL")
        );
        assert_eq!(
            kind(&[
                "[unknown]",
                "ObjectMonitor::enter(JavaThread*)",
                "ObjectMonitor::EnterI(JavaThread*)",
                "PlatformEvent::park()",
                "___pthread_cond_wait"
            ]),
            Some("a monitor (synchronized)")
        );
        assert_eq!(
            kind(&[
                "Unsafe_Park",
                "Parker::park(bool, long)",
                "___pthread_cond_wait"
            ]),
            Some("LockSupport.park (a java.util.concurrent lock)")
        );
        assert_eq!(
            kind(&[
                "LockAcquireExtended",
                "WaitOnLock",
                "ProcSleep",
                "WaitLatch",
                "epoll_wait"
            ]),
            Some("a heavyweight lock (row or table)")
        );
        assert_eq!(
            kind(&[
                "LWLockAcquire",
                "PGSemaphoreLock",
                "sem_wait@@GLIBC_2.34",
                "__new_sem_wait_slow64"
            ]),
            Some("a lightweight lock (semaphore)")
        );
        assert_eq!(
            kind(&[
                "main.worker",
                "sync.(*Mutex).Lock",
                "sync.(*Mutex).lockSlow",
                "sync.runtime_SemacquireMutex",
                "runtime.semacquire1",
                "runtime.park_m",
                "runtime.futexsleep"
            ]),
            Some("a sync.Mutex")
        );
        assert_eq!(
            kind(&[
                "runtime.mallocgc",
                "runtime.lock2",
                "runtime.futexsleep",
                "runtime.futex"
            ]),
            Some("a runtime lock")
        );
        assert_eq!(
            kind(&["worker", "___pthread_mutex_lock", "__lll_lock_wait"]),
            Some("a mutex")
        );
        assert_eq!(
            kind(&["worker", "___pthread_rwlock_wrlock"]),
            Some("a rwlock (write)")
        );
        assert_eq!(
            kind(&["worker", "__new_sem_wait_slow64"]),
            Some("a semaphore")
        );
        assert_eq!(kind(&["worker", "semop"]), Some("a System V semaphore"));
        assert_eq!(
            kind(&[
                "G1ConcurrentRefineThread::run_service()",
                "PosixSemaphore::wait()",
                "__new_sem_wait_slow64"
            ]),
            Some("a worker waiting for work")
        );
        assert_eq!(
            kind(&["queue_get", "___pthread_cond_wait"]),
            Some("a condition variable")
        );
        assert_eq!(kind(&["main", "__futex_abstimed_wait_common"]), None);
    }

    #[test]
    fn a_condition_under_a_stripped_interpreter_far_from_restore_is_a_condition() {
        let frames = [
            "PyEval_RestoreThread",
            "a+0x1",
            "b+0x2",
            "c+0x3",
            "d+0x4",
            "pthread_cond_timedwait",
        ];
        assert_eq!(kind(&frames), Some("a condition variable"));
    }
}
