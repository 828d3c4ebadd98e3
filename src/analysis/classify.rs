//! From an observation to a verdict: the thread-state breakdown (`tsa`),
//! the dominant working state with its number and the runners-up, a
//! confidence, the evidence behind it and the instrument to run next.
//! States first (zombie, stopped), then memory growth, then idle, then the
//! dominant state. Thresholds are in docs/diagnose.md; they are starting
//! points after Gregg's USE and TSA methods, not laws.

use crate::analysis::limits;
use crate::analysis::memory_trend::{self, Trend};
use crate::analysis::tsa::{self, Budget};
use crate::model::diagnosis::{
    Class, Confidence, FaultReads, MemberShare, Next, Observation, Periodic, Scope, ThreadState,
};
use crate::model::drill::{Drill, ExecDrill, ExecFailure};
use crate::model::verdict::{
    Cause, Diagnosis, Finding, LockSeen, MemoryGrowth, Part, Process, StatePart,
};

/// Fewer working threads than this on average (in bursts, when the work
/// comes in bursts) is idle.
pub const IDLE_BELOW: f64 = 0.25;
/// Runnable threads waiting this share of their runnable time or more are
/// waiting for a CPU, whatever CPU they got.
pub const SCHED_SHARE: f64 = 0.4;
/// Stopped this share of the thread time or more is the verdict.
pub const STOPPED_SHARE: f64 = 0.5;
/// A runner-up is named when it has this share of the working time.
pub const RUNNER_UP: f64 = 0.15;
/// Threads parked on a lock of tasks their runtime multiplexes (Go's
/// goroutines) this share of the working time or more, beside CPU: the
/// lock serializes it. A thread parks only when every task it could run
/// waits, so with P threads at most (P-1)/P of them can show it (half with
/// GOMAXPROCS=2), however many goroutines queue.
pub const MULTIPLEXED_LOCK: f64 = 1.0 / 3.0;

pub fn classify(o: &Observation) -> Diagnosis {
    let b = tsa::budget(o);
    let periodic = tsa::periodic(&o.busy, o.bucket_s);
    let w = o.window_s.max(1e-3);
    let working = match &periodic {
        Some(_) => tsa::burst_level(&o.busy).max(b.working_s / w),
        None => b.working_s / w,
    };
    let trend = memory_trend::trend(&o.memory.series, o.window_s);
    let busiest = busiest(o);

    let (verdict, confidence, cause) = if let Some(z) = &o.zombie {
        (
            Class::Zombie,
            Confidence::High,
            Cause::Zombie {
                parent: Process {
                    pid: z.parent_pid,
                    comm: z.parent_comm.clone(),
                },
            },
        )
    } else if (b.total_s > 0.0 && b.seconds(ThreadState::Stopped) >= STOPPED_SHARE * b.total_s)
        || (b.total_s == 0.0 && o.stopped.is_some())
    {
        (Class::Stopped, Confidence::High, stopped(o, &b, Vec::new()))
    } else if let Some(t) = trend.as_ref().filter(|t| t.is_leak()) {
        (
            Class::MemoryTrend,
            if t.fit >= 0.9 {
                Confidence::High
            } else {
                Confidence::Medium
            },
            Cause::MemoryTrend {
                slope_kib_s: t.slope_kib_s,
                warm_up_s: t.warm_up_s,
            },
        )
    } else if working < IDLE_BELOW {
        (
            Class::Idle,
            if working < IDLE_BELOW / 2.0 {
                Confidence::High
            } else {
                Confidence::Medium
            },
            Cause::Idle {
                working,
                cpus: o.cpu_s() / o.window_s.max(1e-3),
                sleeping: top_reasons(&b, ThreadState::Sleeping, 3),
            },
        )
    } else {
        dominant(o, &b)
    };
    // What limits it from outside may explain, or contradict, the states.
    // A thread stuck while work waits for it is no quiet process.
    let found =
        crate::analysis::stalls::judge(o, verdict).or_else(|| limits::judge(o, verdict, &cause));
    let states_said = found.as_ref().map(|_| (verdict, cause.clone()));
    let (verdict, confidence, cause) = match &found {
        Some(f) => (f.verdict, f.confidence, f.cause.clone()),
        None => (verdict, confidence, cause),
    };

    let mut findings = evidence(o, &b, trend.as_ref(), periodic.as_ref(), &busiest);
    findings.extend(limits::evidence(o, verdict));
    findings.extend(crate::analysis::stalls::evidence(o));
    if let Some((class, said)) = states_said.filter(|s| s.0 != verdict) {
        findings.insert(
            0,
            Finding::StatesAlone {
                verdict: class,
                cause: Box::new(said),
                periodic: None,
            },
        );
    }
    // The next command looks at the member that carries the verdict (the
    // one waiting on storage for `io`), else the busiest.
    let carriers = crate::analysis::carriers::carriers(o, verdict);
    if !carriers.is_empty() {
        findings.push(Finding::Carriers {
            verdict,
            carriers: carriers.clone(),
        });
    }
    let target = carriers
        .first()
        .map(|c| c.pid)
        .or(busiest.first().map(|m| m.pid))
        .filter(|_| o.scope != Scope::Process)
        .unwrap_or(o.pid);
    let next = found.map_or_else(|| next(verdict, o, target), |f| f.next);
    Diagnosis {
        verdict,
        confidence,
        cause,
        states: b.states.clone(),
        working_threads: working,
        periodic,
        busiest,
        carriers,
        findings,
        next,
        trend: crate::analysis::trend::shapes(&crate::analysis::trend::on_window_states(
            &o.trend, &b.states,
        )),
    }
}

/// The largest working state, with its share of the working time and the
/// runners-up; on-CPU and run-queue time are judged together as runnable
/// time, the verdict `sched` when the queue holds SCHED_SHARE of it.
fn dominant(o: &Observation, b: &Budget) -> (Class, Confidence, Cause) {
    use ThreadState::*;
    let working: Vec<_> = b.states.iter().filter(|s| s.state != Sleeping).collect();
    let Some(top) = working.first() else {
        return (Class::Idle, Confidence::Low, Cause::Nothing);
    };
    let on = b.seconds(OnCpu);
    let rq = b.seconds(RunQueue);
    let queue_share = if on + rq > 0.0 { rq / (on + rq) } else { 0.0 };
    let state = match top.state {
        OnCpu | RunQueue if queue_share >= SCHED_SHARE => RunQueue,
        OnCpu | RunQueue => OnCpu,
        s => s,
    };
    let multiplexed = crate::analysis::locks::multiplexed(o);
    let serialized = state == OnCpu && multiplexed && b.working_share(Lock) >= MULTIPLEXED_LOCK;
    let state = if serialized { Lock } else { state };
    let share = b.working_share(state);
    let runner_up = working
        .iter()
        .filter(|s| s.state != state)
        .map(|s| s.working_share)
        .fold(0.0, f64::max);
    let margin = share - runner_up;
    let sampled = !matches!(state, OnCpu | RunQueue);
    let mut confidence = if share >= 0.6 && margin >= 0.25 {
        Confidence::High
    } else if margin >= 0.1 || serialized {
        Confidence::Medium
    } else {
        Confidence::Low
    };
    if (sampled && b.off_samples < 30) || o.window_s < 1.0 || o.totals.run_delay_s.is_none() {
        confidence = confidence.min_with(Confidence::Medium);
    }
    let w = o.window_s.max(1e-3);
    let cpus = o.cpu_s() / w;
    let also = runners_up(b, state);
    let (class, cause) = match state {
        OnCpu => (
            Class::Cpu,
            Cause::Cpu {
                share,
                cpus,
                kernel: o.totals.system_s > o.totals.user_s,
                also,
                children: o.totals.unseen_children_cpu_s / o.cpu_s().max(1e-9),
                gc: crate::analysis::runtimes::gc_at_heap_limit(o),
            },
        ),
        RunQueue => (
            Class::Sched,
            Cause::Sched {
                queue_share,
                cpus,
                waited: rq / w,
                also,
            },
        ),
        Storage => (
            Class::Io,
            Cause::Io {
                share,
                waits: top_reasons(b, Storage, 2),
                also,
            },
        ),
        Lock => (
            Class::Lock,
            Cause::Lock {
                share,
                lock: lock_seen(o),
                also,
                multiplexed,
            },
        ),
        Paging => (Class::Paging, Cause::Paging { share, also }),
        Stopped => (Class::Stopped, stopped(o, b, also)),
        _ => (
            Class::Blocked,
            Cause::Blocked {
                share,
                wchans: top_wchans(o, 2),
                also,
            },
        ),
    };
    (class, confidence, cause)
}

impl Confidence {
    fn min_with(self, other: Confidence) -> Confidence {
        let rank = |c: Confidence| match c {
            Confidence::High => 2,
            Confidence::Medium => 1,
            Confidence::Low => 0,
        };
        if rank(self) <= rank(other) {
            self
        } else {
            other
        }
    }
}

/// The working states other than `top` with at least RUNNER_UP of the
/// working time.
fn runners_up(b: &Budget, top: ThreadState) -> Vec<StatePart> {
    b.states
        .iter()
        .filter(|s| s.state != top && s.state != ThreadState::Sleeping)
        .filter(|s| s.working_share >= RUNNER_UP)
        .map(|s| StatePart {
            state: s.state,
            share: s.working_share,
        })
        .collect()
}

fn stopped(o: &Observation, b: &Budget, also: Vec<StatePart>) -> Cause {
    let share = if b.total_s > 0.0 {
        b.seconds(ThreadState::Stopped) / b.total_s
    } else {
        1.0
    };
    Cause::Stopped {
        share,
        stopped: o.stopped.clone(),
        also,
    }
}

/// Shares of counted things, most first (ties by name), at most `most`.
fn shares<K: AsRef<str> + Ord>(by: impl IntoIterator<Item = (K, u64)>, most: usize) -> Vec<Part> {
    let mut v: Vec<(K, u64)> = by.into_iter().collect();
    let all: u64 = v.iter().map(|(_, n)| n).sum::<u64>().max(1);
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.into_iter()
        .take(most)
        .map(|(w, n)| Part {
            what: w.as_ref().to_string(),
            share: n as f64 / all as f64,
        })
        .collect()
}

/// "mutex (futex) 75%, timer 20%": the reasons of one state's samples.
fn top_reasons(b: &Budget, state: ThreadState, most: usize) -> Vec<Part> {
    let Some(why) = b.reasons.get(&state) else {
        return Vec::new();
    };
    shares(why.iter().map(|(w, n)| (*w, *n)), most)
}

/// The kernel functions off-CPU samples waited in most.
fn top_wchans(o: &Observation, most: usize) -> Vec<Part> {
    let mut by: std::collections::BTreeMap<&str, u64> = Default::default();
    for s in o
        .samples
        .iter()
        .filter(|s| s.state != 'R' && !s.wchan.is_empty())
    {
        *by.entry(s.wchan.split('.').next().unwrap_or(""))
            .or_default() += s.count;
    }
    shares(by, most)
}

/// "futex 75%, write (submit_bio_wait) 20%": off-CPU samples by system
/// call, with the kernel function when it was read.
fn top_wait_points(o: &Observation, most: usize) -> Vec<Part> {
    let mut by: std::collections::BTreeMap<String, u64> = Default::default();
    for s in o.samples.iter().filter(|s| s.state != 'R') {
        let wchan = s.wchan.split('.').next().unwrap_or("");
        let key = match (s.syscall.as_str(), wchan) {
            ("", "") => format!("{} state", s.state),
            ("", w) => w.to_string(),
            (c, "") => c.to_string(),
            (c, w) => format!("{c} ({w})"),
        };
        *by.entry(key).or_default() += s.count;
    }
    shares(by, most)
}

/// The lock blocked threads waited for: a lock the waiters' stacks named
/// other than a mutex (the GIL, a monitor, a rwlock) says most; a plain
/// mutex's address says its holder; else glibc's. (A rwlock's waits can
/// look like a contended mutex's to the sampler: its address is not one.)
fn lock_seen(o: &Observation) -> Option<LockSeen> {
    let runtime = o.runtime_locks.iter().find(|l| l.lock);
    if runtime.is_some_and(|l| l.runtime != "glibc" || l.kind != "a mutex") {
        return crate::analysis::locks::seen(o);
    }
    match o.locks.first() {
        Some(l) => Some(LockSeen::Mutex(l.clone())),
        None => crate::analysis::locks::seen(o),
    }
}

/// Members by their share of the tree's CPU, busiest first (those with at
/// least 5%, at most five).
fn busiest(o: &Observation) -> Vec<MemberShare> {
    let total: f64 = o.members.iter().map(|m| m.user_s + m.system_s).sum();
    if o.members.len() < 2 || total <= 0.0 {
        return Vec::new();
    }
    let mut v: Vec<MemberShare> = o
        .members
        .iter()
        .map(|m| MemberShare {
            pid: m.pid,
            comm: m.comm.clone(),
            cpu_share: (m.user_s + m.system_s) / total,
        })
        .filter(|m| m.cpu_share >= 0.05)
        .collect();
    v.sort_by(|a, b| b.cpu_share.total_cmp(&a.cpu_share).then(a.pid.cmp(&b.pid)));
    v.truncate(5);
    v
}

fn evidence(
    o: &Observation,
    b: &Budget,
    trend: Option<&Trend>,
    periodic: Option<&Periodic>,
    busiest: &[MemberShare],
) -> Vec<Finding> {
    let w = o.window_s.max(1e-3);
    let t = &o.totals;
    let mut e = Vec::new();
    if let Some(z) = &o.zombie {
        e.push(Finding::Zombie {
            parent: Process {
                pid: z.parent_pid,
                comm: z.parent_comm.clone(),
            },
        });
        return e;
    }
    if let Some(k) = &o.kernel_thread {
        e.push(Finding::KernelThread { thread: k.clone() });
    }
    if let Some(x) = &o.ended {
        e.push(Finding::Ended(x.clone()));
    }
    e.push(Finding::ThreadTime {
        states: b
            .states
            .iter()
            .map(|s| StatePart {
                state: s.state,
                share: s.share,
            })
            .collect(),
        thread_s: b.total_s,
        working: b.working_s / w,
    });
    e.push(Finding::Cpu {
        user_s: t.user_s,
        system_s: t.system_s,
        cpu_s: o.cpu_s(),
        window_s: w,
        threads: t.threads,
        processes: t.processes,
    });
    // The thread states' run queue (run_delay, and throttled runnable time
    // outside it), so this line and the states agree.
    e.push(Finding::RunQueue {
        delay_s: t.run_delay_s.map(|_| b.seconds(ThreadState::RunQueue)),
        cpu_s: o.cpu_s(),
    });
    if let (Some(r), Some(wr)) = (t.read_bytes, t.write_bytes) {
        e.push(Finding::Storage {
            read_per_s: r as f64 / w,
            written_per_s: wr as f64 / w,
            major_per_s: t.major_faults as f64 / w,
            minor_per_s: t.minor_faults as f64 / w,
            blkio_delay_s: t.blkio_delay_s,
        });
    }
    // A file read through page faults: the kernel time handling them
    // counted as storage (tsa::fault_reads), said beside the storage.
    if b.fault_cpu_s > 0.0 {
        e.push(Finding::FaultReads {
            reads: FaultReads {
                major_faults: t.major_faults,
                minor_faults: t.minor_faults,
                read_bytes: t.read_bytes.unwrap_or(0),
                kernel_s: b.fault_cpu_s,
                system_s: t.system_s,
            },
            window_s: w,
        });
    }
    for state in [
        ThreadState::Storage,
        ThreadState::Lock,
        ThreadState::Other,
        ThreadState::Sleeping,
    ] {
        // The breakdown is of that state's time: say what share of all
        // the thread time that is.
        let waits = top_reasons(b, state, 4);
        if !waits.is_empty() {
            let of = b.seconds(state) / b.total_s.max(1e-9);
            e.push(Finding::Waits { state, of, waits });
        }
    }
    if b.off_samples > 0 {
        e.push(Finding::BlockedIn {
            waits: top_wait_points(o, 4),
        });
    }
    // Waits no working thread could be behind are no lock (tsa::no_holder).
    if let Some(l) = lock_seen(o).filter(|_| !tsa::no_holder(o)) {
        e.push(Finding::Lock { lock: l });
    }
    if let Some(s) = &o.stopped {
        e.push(Finding::Stopped(s.clone()));
    }
    if let Some(h) = &o.jvm {
        e.push(Finding::JvmHeap {
            heap: h.clone(),
            cpu_s: o.cpu_s(),
            window_s: w,
        });
    }
    if o.kernel_thread.is_none() {
        e.push(memory(o, trend));
    }
    if let Some(p) = periodic {
        e.push(Finding::Periodic(p.clone()));
    }
    if !busiest.is_empty() {
        e.push(Finding::Tree {
            busiest: busiest.to_vec(),
            unseen_children_cpu_s: t.unseen_children_cpu_s,
        });
    }
    if !o.syscalls_readable {
        e.push(Finding::SyscallsUnreadable);
    }
    if !o.delay_accounting && b.seconds(ThreadState::Storage) > 0.0 {
        e.push(Finding::StorageEstimated);
    }
    e
}

fn memory(o: &Observation, trend: Option<&Trend>) -> Finding {
    let (Some(first), Some(last)) = (o.memory.series.first(), o.memory.series.last()) else {
        return Finding::MemoryUnread;
    };
    Finding::Memory {
        first: *first,
        last: *last,
        end: o.memory.end,
        trend: trend.map(|t| MemoryGrowth {
            warm_up_s: t.warm_up_s,
            slope_kib_s: t.slope_kib_s,
            step: !(t.sustained || t.growth_kib.abs() < 1024.0),
        }),
    }
}

fn next(verdict: Class, o: &Observation, pid: i32) -> Vec<String> {
    // A kernel thread's work comes from the processes that drive it.
    if let Some(d) = o.kernel_thread.as_ref().and_then(|k| k.drivers.first()) {
        return vec![format!("kdiag diagnose -p {}", d.pid)];
    }
    match verdict.spec().next {
        Next::Nothing | Next::Found => vec![],
        Next::Drill(d) => vec![d.command(pid)],
        Next::Competition => vec![Drill::Sched.command(pid), Drill::Cpu.command_for(&[])],
        Next::Threads => vec![format!("kdiag top -p {pid}"), Drill::Cpu.command(pid)],
        Next::Continue => match &o.stopped {
            Some(s) if s.tracer_pid.is_none() => vec![format!("kill -CONT {}", s.pid)],
            _ => vec![],
        },
        Next::Parent => o
            .zombie
            .as_ref()
            .map(|z| vec![format!("kdiag diagnose -p {}", z.parent_pid)])
            .unwrap_or_default(),
    }
}

/// Failed execs outweigh what the thread states say: a service whose
/// children cannot start looks idle between attempts. Only a zombie or a
/// stopped target keeps its verdict; the thread states' verdict stays as
/// the first piece of evidence. A program that started, then crashed or
/// was killed, is not an exec failure.
pub fn with_exec_failures(mut d: Diagnosis, exec: &ExecDrill, pid: i32) -> Diagnosis {
    let failed: Vec<&ExecFailure> = exec
        .failures
        .iter()
        .filter(|f| !matches!(f.family.as_str(), "killed" | "user-crash"))
        .collect();
    let Some(first) = failed.first() else {
        return d;
    };
    if d.verdict.spec().kept {
        return d;
    }
    let times: u64 = failed.iter().map(|f| f.times).sum();
    // exec-trace's text up to its explanation: what failed, and how.
    let what = first
        .text
        .split_once(": ")
        .map_or(first.text.as_str(), |(w, _)| w);
    let periodic = d.periodic.clone();
    d.findings.insert(
        0,
        Finding::StatesAlone {
            verdict: d.verdict,
            cause: Box::new(d.cause.clone()),
            periodic,
        },
    );
    d.verdict = Class::Exec;
    d.confidence = Confidence::High;
    d.cause = Cause::Exec {
        failed: times,
        execs: exec.execs,
        times: first.times,
        pid: first.pid,
        what: what.to_string(),
    };
    d.next = vec![Drill::Exec.command(pid)];
    if let (Some(_), Some(file)) = (&first.cause, &first.filename) {
        d.next.push(format!("kdiag elf-check {file}"));
    }
    d
}
