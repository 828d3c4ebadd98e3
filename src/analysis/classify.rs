//! From an observation to a verdict: the thread-state breakdown (`tsa`),
//! the dominant working state with its number and the runners-up, a
//! confidence, the evidence behind it and the instrument to run next.
//! States first (zombie, stopped), then memory growth, then idle, then the
//! dominant state. Thresholds are in docs/diagnose.md; they are starting
//! points after Gregg's USE and TSA methods, not laws.

use crate::analysis::io_pattern::human_bytes;
use crate::analysis::limits;
use crate::analysis::memory_trend::{self, Trend};
use crate::analysis::tsa::{self, Budget};
use crate::analysis::why::Drill;
use crate::model::diagnosis::{
    Class, Confidence, Diagnosis, FaultReads, MemberShare, Observation, Periodic, Scope,
    ThreadState,
};
use crate::model::drill::{ExecDrill, ExecFailure};

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

    let (verdict, confidence, summary) = if let Some(z) = &o.zombie {
        (
            Class::Zombie,
            Confidence::High,
            format!(
                "exited; its parent PID {} ({}) has not reaped it (called wait() for its exit status)",
                z.parent_pid, z.parent_comm
            ),
        )
    } else if (b.total_s > 0.0 && b.seconds(ThreadState::Stopped) >= STOPPED_SHARE * b.total_s)
        || (b.total_s == 0.0 && o.stopped.is_some())
    {
        (Class::Stopped, Confidence::High, stopped_summary(o, &b))
    } else if let Some(t) = trend.as_ref().filter(|t| t.is_leak()) {
        (
            Class::MemoryTrend,
            if t.fit >= 0.9 {
                Confidence::High
            } else {
                Confidence::Medium
            },
            format!(
                "anonymous memory grows steadily, {:.1} MiB/s after a {:.1} s warm-up: a leak or an unbounded cache",
                t.slope_kib_s / 1024.0,
                t.warm_up_s
            ),
        )
    } else if working < IDLE_BELOW {
        (
            Class::Idle,
            if working < IDLE_BELOW / 2.0 {
                Confidence::High
            } else {
                Confidence::Medium
            },
            idle_summary(o, &b, working),
        )
    } else {
        dominant(o, &b)
    };
    // What limits it from outside may explain, or contradict, the states.
    // A thread stuck while work waits for it is no quiet process.
    let found =
        crate::analysis::stalls::judge(o, verdict).or_else(|| limits::judge(o, verdict, &summary));
    let states_said = found.as_ref().map(|_| (verdict, summary.clone()));
    let (verdict, confidence, mut summary) = match &found {
        Some(f) => (f.verdict, f.confidence, f.summary.clone()),
        None => (verdict, confidence, summary),
    };
    if let Some(p) = &periodic
        && !matches!(verdict, Class::Zombie | Class::Stopped)
    {
        summary.push_str(&format!("; {}", periodic_text(p)));
    }

    let mut evidence = evidence(o, &b, trend.as_ref(), periodic.as_ref(), &busiest);
    evidence.extend(limits::evidence(o, verdict));
    evidence.extend(crate::analysis::stalls::evidence(o));
    if let Some((class, said)) = states_said.filter(|s| s.0 != verdict) {
        evidence.insert(0, format!("Thread states alone: {}: {said}", class.name()));
    }
    // The next command looks at the member that carries the verdict (the
    // one waiting on storage for `io`), else the busiest.
    let carriers = crate::analysis::carriers::carriers(o, verdict);
    if let Some(line) = crate::analysis::carriers::line(&carriers, verdict) {
        evidence.push(line);
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
        summary,
        states: b.states.clone(),
        working_threads: working,
        periodic,
        busiest,
        carriers,
        evidence,
        next,
        trend: crate::analysis::trend::shapes(&o.trend),
        fault_reads: (b.fault_cpu_s > 0.0).then(|| FaultReads {
            major_faults: o.totals.major_faults,
            minor_faults: o.totals.minor_faults,
            read_bytes: o.totals.read_bytes.unwrap_or(0),
            kernel_s: b.fault_cpu_s,
            system_s: o.totals.system_s,
        }),
    }
}

/// The largest working state, with its share of the working time and the
/// runners-up; on-CPU and run-queue time are judged together as runnable
/// time, the verdict `sched` when the queue holds SCHED_SHARE of it.
fn dominant(o: &Observation, b: &Budget) -> (Class, Confidence, String) {
    use ThreadState::*;
    let working: Vec<_> = b.states.iter().filter(|s| s.state != Sleeping).collect();
    let Some(top) = working.first() else {
        return (Class::Idle, Confidence::Low, "nothing measured".into());
    };
    let on = b.seconds(OnCpu);
    let rq = b.seconds(RunQueue);
    let queue_share = if on + rq > 0.0 { rq / (on + rq) } else { 0.0 };
    let state = match top.state {
        OnCpu | RunQueue if queue_share >= SCHED_SHARE => RunQueue,
        OnCpu | RunQueue => OnCpu,
        s => s,
    };
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
    } else if margin >= 0.1 {
        Confidence::Medium
    } else {
        Confidence::Low
    };
    if (sampled && b.off_samples < 30) || o.window_s < 1.0 || o.totals.run_delay_s.is_none() {
        confidence = confidence.min_with(Confidence::Medium);
    }
    let w = o.window_s.max(1e-3);
    let cpus = o.cpu_s() / w;
    let others = runners_up(b, state);
    let (class, text) = match state {
        OnCpu => (
            Class::Cpu,
            format!(
                "CPU-bound: on CPU {:.0}% of its working time ({cpus:.2} CPUs, mostly in {})",
                share * 100.0,
                if o.totals.system_s > o.totals.user_s {
                    "the kernel"
                } else {
                    "user space"
                }
            ),
        ),
        RunQueue => (
            Class::Sched,
            format!(
                "waiting for a CPU: {:.0}% of its runnable time in the run queue ({cpus:.2} CPUs used, {:.2} waited for)",
                queue_share * 100.0,
                rq / w
            ),
        ),
        Storage => (
            Class::Io,
            format!(
                "waiting for storage {:.0}% of its working time ({})",
                share * 100.0,
                top_reasons(b, Storage, 2)
            ),
        ),
        Lock => (
            Class::Lock,
            format!(
                "waiting for a lock {:.0}% of its working time{}",
                share * 100.0,
                lock_text(o).map_or(String::new(), |t| format!(": {t}"))
            ),
        ),
        Paging => (
            Class::Paging,
            format!(
                "waiting for pages from swap {:.0}% of its working time",
                share * 100.0
            ),
        ),
        Stopped => (Class::Stopped, stopped_summary(o, b)),
        _ => (
            Class::Blocked,
            format!(
                "blocked in the kernel {:.0}% of its working time, in {}",
                share * 100.0,
                top_wchans(o, 2)
            ),
        ),
    };
    let text = if others.is_empty() {
        text
    } else {
        format!("{text}; also {others}")
    };
    (class, confidence, text)
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

/// "waiting for a CPU 35%, waiting for storage 20%": working states other
/// than `top` with at least RUNNER_UP of the working time.
fn runners_up(b: &Budget, top: ThreadState) -> String {
    b.states
        .iter()
        .filter(|s| s.state != top && s.state != ThreadState::Sleeping)
        .filter(|s| s.working_share >= RUNNER_UP)
        .map(|s| format!("{} {:.0}%", s.state.describe(), s.working_share * 100.0))
        .collect::<Vec<_>>()
        .join(", ")
}

fn stopped_summary(o: &Observation, b: &Budget) -> String {
    let share = if b.total_s > 0.0 {
        b.seconds(ThreadState::Stopped) / b.total_s
    } else {
        1.0
    };
    let by = match &o.stopped {
        Some(s) if s.tracer_pid.is_some() => format!(
            "by its tracer {} (PID {}, ptrace): it runs again when the tracer lets it",
            s.tracer_comm.as_deref().unwrap_or("?"),
            s.tracer_pid.unwrap_or(0)
        ),
        Some(s) => format!(
            "by a signal (SIGSTOP, SIGTSTP from Ctrl-Z, or SIGTTIN/SIGTTOU): resume it with `kill -CONT {}`",
            s.pid
        ),
        None => "by a signal or a tracer".into(),
    };
    format!("stopped {:.0}% of its thread time, {by}", share * 100.0)
}

fn idle_summary(o: &Observation, b: &Budget, working: f64) -> String {
    let why = top_reasons(b, ThreadState::Sleeping, 3);
    format!(
        "mostly idle: {working:.2} threads working on average, {:.2} CPUs{}",
        o.cpu_s() / o.window_s.max(1e-3),
        if why.is_empty() {
            String::new()
        } else {
            format!("; sleeping by design in {why}")
        }
    )
}

fn periodic_text(p: &Periodic) -> String {
    format!(
        "busy {:.0}% of the time in bursts of about {:.1} s{}",
        p.busy_share * 100.0,
        p.burst_s,
        p.period_s
            .map_or(String::new(), |s| format!(", every {s:.1} s"))
    )
}

/// "mutex (futex) 75%, timer 20%": the reasons of one state's samples.
fn top_reasons(b: &Budget, state: ThreadState, most: usize) -> String {
    let Some(why) = b.reasons.get(&state) else {
        return String::new();
    };
    let all: u64 = why.values().sum::<u64>().max(1);
    let mut v: Vec<_> = why.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    v.iter()
        .take(most)
        .map(|(w, n)| format!("{w} {:.0}%", **n as f64 * 100.0 / all as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The kernel functions off-CPU samples waited in most.
fn top_wchans(o: &Observation, most: usize) -> String {
    let mut by: std::collections::BTreeMap<&str, u64> = Default::default();
    for s in o
        .samples
        .iter()
        .filter(|s| s.state != 'R' && !s.wchan.is_empty())
    {
        *by.entry(s.wchan.split('.').next().unwrap_or(""))
            .or_default() += s.count;
    }
    let all: u64 = by.values().sum::<u64>().max(1);
    let mut v: Vec<_> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v.iter()
        .take(most)
        .map(|(w, n)| format!("{w} {:.0}%", *n as f64 * 100.0 / all as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "futex 75%, write (submit_bio_wait) 20%": off-CPU samples by system
/// call, with the kernel function when it was read.
fn top_wait_points(o: &Observation, most: usize) -> String {
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
    let all: u64 = by.values().sum::<u64>().max(1);
    let mut v: Vec<_> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.iter()
        .take(most)
        .map(|(w, n)| format!("{w} {:.0}%", *n as f64 * 100.0 / all as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "3 threads waited on the mutex at 0x55.. (up to 3 at once); another
/// thread was on CPU or runnable 90% of that time: the holder works while
/// holding it".
fn lock_text(o: &Observation) -> Option<String> {
    // A runtime's lock the waiters' stacks named (the GIL, a monitor)
    // says most; a plain mutex's address says its holder; else glibc's.
    let runtime = o.runtime_locks.iter().find(|l| l.lock);
    if runtime.is_some_and(|l| l.runtime != "glibc") {
        return crate::analysis::locks::text(o);
    }
    let Some(l) = o.locks.first() else {
        return crate::analysis::locks::text(o);
    };
    let holder = if l.running_share >= 0.5 {
        "the holder works while holding it"
    } else {
        "the holder mostly sleeps or blocks while holding it"
    };
    Some(format!(
        "{} thread{} waited on the mutex at {} in PID {} (up to {} at once); another thread was on CPU or runnable {:.0}% of that time: {holder}",
        l.waiters,
        if l.waiters == 1 { "" } else { "s" },
        l.address,
        l.pid,
        l.most_at_once,
        l.running_share * 100.0
    ))
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
) -> Vec<String> {
    let w = o.window_s.max(1e-3);
    let t = &o.totals;
    let mut e = Vec::new();
    if let Some(z) = &o.zombie {
        e.push(format!(
            "Zombie: its exit status waits for PID {} ({}) to call wait(); the zombie holds no memory, only a PID. If the parent never reaps, the parent is the bug (`kdiag diagnose -p {}`); if the parent exits, init reaps it.",
            z.parent_pid, z.parent_comm, z.parent_pid
        ));
        return e;
    }
    if let Some(k) = &o.kernel_thread {
        let mut line = format!("Kernel thread ({}): {}", k.kind, k.what);
        if !k.drivers.is_empty() {
            let what = if k.kind == "reclaim" || k.kind == "compaction" {
                "anonymous memory gained"
            } else {
                "written"
            };
            let ds: Vec<String> = k
                .drivers
                .iter()
                .map(|d| format!("{} (PID {}) {} {what}", d.comm, d.pid, human_bytes(d.bytes)))
                .collect();
            line.push_str(&format!("; driven by {}", ds.join(", ")));
        }
        e.push(line);
    }
    if let Some(x) = &o.ended {
        e.push(format!(
            "Ended after {:.1} s{}: the figures cover that time",
            x.after_s,
            x.how.as_ref().map_or(String::new(), |h| format!(" ({h})"))
        ));
    }
    let states: Vec<String> = b
        .states
        .iter()
        .map(|s| format!("{} {:.0}%", s.state.describe(), s.share * 100.0))
        .collect();
    e.push(format!(
        "Thread time: {} (of {:.1} thread-seconds; {:.2} threads working on average)",
        states.join(", "),
        b.total_s,
        b.working_s / w
    ));
    e.push(format!(
        "CPU: {:.2} CPUs (user {:.2} s, system {:.2} s in {w:.1} s), {} thread{} in {} process{}",
        o.cpu_s() / w,
        t.user_s,
        t.system_s,
        t.threads,
        if t.threads == 1 { "" } else { "s" },
        t.processes,
        if t.processes == 1 { "" } else { "es" }
    ));
    e.push(match t.run_delay_s {
        // A share of almost no runnable time says nothing (a microsecond of
        // queueing would read 100%).
        Some(d) if o.cpu_s() + d < 0.01 => {
            format!("Waiting for a CPU: run queue {d:.2} s (hardly ever runnable)")
        }
        Some(d) => format!(
            "Waiting for a CPU: {:.0}% of the runnable time (run queue {d:.2} s)",
            d * 100.0 / (o.cpu_s() + d)
        ),
        None => "Waiting for a CPU: unknown (this kernel keeps no schedstats)".to_string(),
    });
    if let (Some(r), Some(wr)) = (t.read_bytes, t.write_bytes) {
        let mut line = format!(
            "Storage: read {}/s, written {}/s; page faults: major {:.0}/s, minor {:.0}/s",
            human_bytes((r as f64 / w) as u64),
            human_bytes((wr as f64 / w) as u64),
            t.major_faults as f64 / w,
            t.minor_faults as f64 / w
        );
        if let Some(blk) = t.blkio_delay_s {
            line.push_str(&format!("; block-I/O delay {blk:.2} s (delay accounting)"));
        }
        e.push(line);
    }
    for (state, label) in [
        (ThreadState::Storage, "Storage waits"),
        (ThreadState::Lock, "Lock waits"),
        (ThreadState::Other, "Other waits"),
        (ThreadState::Sleeping, "Sleeping by design"),
    ] {
        // The breakdown is of that state's time: say what share of all
        // the thread time that is.
        let r = top_reasons(b, state, 4);
        if !r.is_empty() {
            let of = b.seconds(state) * 100.0 / b.total_s.max(1e-9);
            e.push(format!("{label} ({of:.0}% of the thread time): {r}"));
        }
    }
    if b.off_samples > 0 {
        e.push(format!("Blocked in: {}", top_wait_points(o, 4)));
    }
    if let Some(l) = lock_text(o) {
        e.push(format!("Lock: {l}"));
    }
    if let Some(s) = &o.stopped {
        e.push(format!(
            "Stopped: PID {} was seen stopped{}",
            s.pid,
            s.tracer_pid.map_or(String::new(), |t| format!(
                " with tracer {} (PID {t})",
                s.tracer_comm.as_deref().unwrap_or("?")
            ))
        ));
    }
    if o.kernel_thread.is_none() {
        e.push(memory_line(o, trend));
    }
    if let Some(p) = periodic {
        e.push(format!("Periodic: {}", periodic_text(p)));
    }
    if !busiest.is_empty() {
        let v: Vec<String> = busiest
            .iter()
            .map(|m| format!("{} (PID {}) {:.0}%", m.comm, m.pid, m.cpu_share * 100.0))
            .collect();
        let mut line = format!("Tree: {} of the tree's CPU", v.join(", "));
        if t.unseen_children_cpu_s >= 0.01 {
            line.push_str(&format!(
                "; children too short-lived to see used {:.2} s",
                t.unseen_children_cpu_s
            ));
        }
        e.push(line);
    }
    if !o.syscalls_readable {
        e.push("Note: the threads' syscall files were unreadable (they need ptrace access: run as root or as the owner); wait points come from kernel function names".into());
    }
    if !o.delay_accounting && b.seconds(ThreadState::Storage) > 0.0 {
        e.push("Note: storage time is estimated from samples; with delay accounting (sysctl kernel.task_delayacct=1, then restart the program) it is measured".into());
    }
    e
}

fn memory_line(o: &Observation, trend: Option<&Trend>) -> String {
    let (Some(first), Some(last)) = (o.memory.series.first(), o.memory.series.last()) else {
        return "Memory: not read".into();
    };
    let kib = |k: u64| human_bytes(k * 1024);
    let delta = |a: u64, b: u64| {
        let d = b as i64 - a as i64;
        format!("{}{}", if d < 0 { "-" } else { "+" }, kib(d.unsigned_abs()))
    };
    let mut line = format!(
        "Memory: anonymous {} ({}), file-backed {} ({}), shared {} ({}), swapped out {}",
        kib(last.anon_kib),
        delta(first.anon_kib, last.anon_kib),
        kib(last.file_kib),
        delta(first.file_kib, last.file_kib),
        kib(last.shmem_kib),
        delta(first.shmem_kib, last.shmem_kib),
        kib(last.swap_kib),
    );
    if let Some(m) = &o.memory.end {
        line.push_str(&format!(
            "; PSS {}, private {}, shared with other processes {}",
            kib(m.pss_kib),
            kib(m.private_kib),
            kib(m.shared_kib)
        ));
    }
    if let Some(t) = trend {
        line.push_str(&format!(
            "; after a {:.1} s warm-up {:+.2} MiB/s{}",
            t.warm_up_s,
            t.slope_kib_s / 1024.0,
            if t.sustained || t.growth_kib.abs() < 1024.0 {
                ""
            } else {
                " (a step, not a steady growth)"
            }
        ));
    }
    line
}

fn next(verdict: Class, o: &Observation, pid: i32) -> Vec<String> {
    // A kernel thread's work comes from the processes that drive it.
    if let Some(d) = o.kernel_thread.as_ref().and_then(|k| k.drivers.first()) {
        return vec![format!("kdiag diagnose -p {}", d.pid)];
    }
    match verdict {
        Class::Cpu => vec![Drill::Cpu.command(pid)],
        Class::Sched => vec![Drill::Sched.command(pid), Drill::Cpu.command_for(&[])],
        Class::Io | Class::Paging => vec![Drill::Storage.command(pid)],
        Class::Lock | Class::MemoryTrend | Class::Blocked => {
            vec![format!("kdiag top -p {pid}"), Drill::Cpu.command(pid)]
        }
        Class::Stopped => match &o.stopped {
            Some(s) if s.tracer_pid.is_none() => vec![format!("kill -CONT {}", s.pid)],
            _ => vec![],
        },
        Class::Zombie => o
            .zombie
            .as_ref()
            .map(|z| vec![format!("kdiag diagnose -p {}", z.parent_pid)])
            .unwrap_or_default(),
        Class::Idle => vec![],
        Class::Exec => vec![Drill::Exec.command(pid)],
        // Found in the limits, with their own next steps.
        Class::CpuQuota | Class::IoLimit | Class::MemoryLimit | Class::OomKill | Class::Stall => {
            vec![]
        }
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
    if matches!(d.verdict, Class::Zombie | Class::Stopped) {
        return d;
    }
    let times: u64 = failed.iter().map(|f| f.times).sum();
    // exec-trace's text up to its explanation: what failed, and how.
    let what = first
        .text
        .split_once(": ")
        .map_or(first.text.as_str(), |(w, _)| w);
    d.evidence.insert(
        0,
        format!("Thread states alone: {}: {}", d.verdict.name(), d.summary),
    );
    d.verdict = Class::Exec;
    d.confidence = Confidence::High;
    d.summary = format!(
        "what it starts cannot run: {times} of {} execs failed; {} time{}, the last as PID {}: {what}",
        exec.execs,
        first.times,
        if first.times == 1 { "" } else { "s" },
        first.pid
    );
    d.next = vec![Drill::Exec.command(pid)];
    if let (Some(_), Some(file)) = (&first.cause, &first.filename) {
        d.next.push(format!("kdiag elf-check {file}"));
    }
    d
}

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;
