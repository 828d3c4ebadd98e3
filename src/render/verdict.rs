//! The words of a verdict: the one place that turns a `Diagnosis`'s cause
//! and findings (`model::verdict`, plain data) into the sentences the text
//! report, the HTML report and the tests read. Changing a wording here
//! changes neither the JSON nor the record format.

use crate::analysis::io_pattern::human_bytes;
use crate::model::diagnosis::{Class, KernelThread, Periodic, Stopped, ThreadState};
use crate::model::limits::{CpuQuota, MemoryLimit, Pressure};
use crate::model::stalls::{Stall, Waiting};
use crate::model::verdict::{
    Cause, Cgroup, Device, Diagnosis, Finding, IoAgainst, IoLimitKind, LimitKind, Part, Process,
    StatePart,
};

/// A mutex's waiters saw another thread of its process running this share
/// of the time or more: the holder works while holding it.
pub const HOLDER_WORKS: f64 = 0.5;

/// The verdict's sentence: its cause, and the bursts when the work comes
/// in bursts.
pub fn summary(d: &Diagnosis) -> String {
    sentence(d.verdict, &d.cause, d.periodic.as_ref())
}

/// The evidence, one line per finding.
pub fn evidence(d: &Diagnosis) -> Vec<String> {
    d.findings.iter().map(finding).collect()
}

fn sentence(verdict: Class, c: &Cause, periodic: Option<&Periodic>) -> String {
    let mut s = cause(c);
    if let Some(p) = periodic
        && !verdict.spec().kept
    {
        s.push_str(&format!("; {}", periodic_text(p)));
    }
    s
}

/// One cause in words.
pub fn cause(c: &Cause) -> String {
    let pct = |x: f64| x * 100.0;
    match c {
        Cause::Zombie { parent } => format!(
            "exited; its parent PID {} ({}) has not reaped it (called wait() for its exit status)",
            parent.pid, parent.comm
        ),
        Cause::Stopped {
            share,
            stopped,
            also,
        } => with_also(
            format!(
                "stopped {:.0}% of its thread time, {}",
                pct(*share),
                stopped_by(stopped.as_ref())
            ),
            also,
        ),
        Cause::MemoryTrend {
            slope_kib_s,
            warm_up_s,
        } => format!(
            "anonymous memory grows steadily, {:.1} MiB/s after a {warm_up_s:.1} s warm-up: a leak or an unbounded cache",
            slope_kib_s / 1024.0
        ),
        Cause::Idle {
            working,
            cpus,
            sleeping,
        } => format!(
            "mostly idle: {working:.2} threads working on average, {cpus:.2} CPUs{}",
            if sleeping.is_empty() {
                String::new()
            } else {
                format!("; sleeping by design in {}", parts(sleeping))
            }
        ),
        Cause::Nothing => "nothing measured".into(),
        Cause::Cpu {
            share,
            cpus,
            kernel,
            also,
            children,
            gc,
        } => {
            let mut s = format!(
                "CPU-bound: on CPU {:.0}% of its working time ({cpus:.2} CPUs, mostly in {})",
                pct(*share),
                if *kernel { "the kernel" } else { "user space" }
            );
            if *children >= 0.5 {
                s.push_str(&format!(
                    ", {:.0}% of it in children too short-lived to see (each under 0.1 s): a fork storm",
                    pct(*children)
                ));
            }
            if let Some(g) = gc {
                s.push_str(&format!("; {}", gc_text(g)));
            }
            with_also(s, also)
        }
        Cause::Sched {
            queue_share,
            cpus,
            waited,
            also,
        } => with_also(
            format!(
                "{:.0}% of its runnable time in the run queue ({cpus:.2} CPUs used, {waited:.2} waited for)",
                pct(*queue_share)
            ),
            also,
        ),
        Cause::Io { share, waits, also } => with_also(
            format!(
                "waiting for storage {:.0}% of its working time ({})",
                pct(*share),
                parts(waits)
            ),
            also,
        ),
        Cause::Lock {
            share,
            lock,
            also,
            multiplexed: false,
        } => with_also(
            format!(
                "waiting for a lock {:.0}% of its working time{}",
                pct(*share),
                lock.as_ref()
                    .map_or(String::new(), |l| format!(": {}", lock_text(l)))
            ),
            also,
        ),
        Cause::Lock {
            share,
            lock,
            also,
            multiplexed: true,
        } => with_also(
            format!(
                "serialized on a lock of its runtime's tasks: its threads sat parked {:.0}% of their working time with no task left to run, the others queued on the lock (one parked thread stands for every task behind it){}",
                pct(*share),
                lock.as_ref()
                    .map_or(String::new(), |l| format!("; {}", lock_text(l))),
            ),
            also,
        ),
        Cause::Paging { share, also } => with_also(
            format!(
                "waiting for pages from swap {:.0}% of its working time",
                pct(*share)
            ),
            also,
        ),
        Cause::Blocked {
            share,
            wchans,
            also,
        } => with_also(
            format!(
                "blocked in the kernel {:.0}% of its working time, in {}",
                pct(*share),
                parts(wchans)
            ),
            also,
        ),
        Cause::OomKill {
            kills,
            cgroup,
            max,
            ended,
        } => {
            let whom = if ended.is_empty() {
                "none of the tree's members ended: the victims were other processes of the cgroup"
                    .into()
            } else {
                let v: Vec<String> = ended.iter().map(process).collect();
                format!("the tree's members that ended: {}", v.join(", "))
            };
            format!(
                "the OOM killer killed {kills} process{} in its memory cgroup {}{}; {whom}",
                if *kills == 1 { "" } else { "es" },
                cgroup_name(cgroup),
                max.map_or(String::new(), |x| format!(" (limit {})", human_bytes(x)))
            )
        }
        Cause::CpuQuota {
            cgroup,
            quota,
            used,
            waited,
        } => format!(
            "throttled by its CPU quota: {} at {}, throttled in {} of {} periods; it used {used:.2} CPUs and waited {waited:.2} CPUs' worth for its quota to refill, not for other processes",
            quota_text(cgroup, quota),
            cgroup_name(cgroup),
            quota.throttled,
            quota.periods,
        ),
        Cause::NotCompetition {
            states,
            idle,
            pressure,
            read,
        } => {
            let why = match (idle, pressure) {
                (Some(c), _) => format!("{:.1} of {} CPUs stood idle on average", c.idle, c.cpus),
                (None, Some(some)) => format!("CPU pressure was {:.0}% (PSI some)", pct(*some)),
                (None, None) => "the CPUs were not contended".into(),
            };
            format!(
                "{}; but {why}: not competition for the CPUs, and no CPU quota throttled its cgroups{}",
                cause(states),
                places(read)
            )
        }
        Cause::IoLimit {
            cgroup,
            device: d,
            against,
        } => format!(
            "I/O limited by its cgroup: {} on {} ({:.0}% of it) at {}: it waits for the limit, not for the device",
            against_text(against),
            device(d),
            pct(against.used),
            cgroup_name(cgroup)
        ),
        Cause::MemoryLimit {
            cgroup,
            limit,
            window_s,
        } => format!(
            "reclaim under its memory limit: {} at {}, {}, {} pages evicted and read again (refaults) in {window_s:.1} s: its working set does not fit, and it waits for storage to read back what the limit evicted",
            memory_limit_text(limit),
            cgroup_name(cgroup),
            hits(limit),
            limit.refaults,
        ),
        Cause::Stall { stall: s, window_s } => format!(
            "stalled: thread {} ({}) of PID {} stayed in {} the whole {window_s:.1} s window{} while {}",
            s.tid,
            s.comm,
            s.pid,
            call_text(s),
            s.so_far_s
                .map_or(String::new(), |t| format!(" ({t:.1} s so far)")),
            waiting_text(&s.waiting)
        ),
        Cause::PidsLimit {
            cgroup,
            limit,
            window_s,
        } => format!(
            "forks refused by its cgroup's pids.max: {} in {window_s:.1} s, {} of {} processes at {}: what it starts cannot start",
            limit.refused,
            limit.current,
            limit.max,
            cgroup_name(cgroup)
        ),
        Cause::Exec {
            failed,
            execs,
            times,
            pid,
            what,
        } => format!(
            "what it starts cannot run: {failed} of {execs} execs failed; {times} time{}, the last as PID {pid}: {what}",
            if *times == 1 { "" } else { "s" },
        ),
    }
}

/// One finding as its line of evidence.
pub fn finding(f: &Finding) -> String {
    match f {
        Finding::StatesAlone {
            verdict,
            cause: c,
            periodic,
        } => format!(
            "Thread states alone: {}: {}",
            verdict.name(),
            sentence(*verdict, c, periodic.as_ref())
        ),
        Finding::Zombie { parent } => format!(
            "Zombie: its exit status waits for PID {} ({}) to call wait(); the zombie holds no memory, only a PID. If the parent never reaps, the parent is the bug (`kdiag diagnose -p {}`); if the parent exits, init reaps it.",
            parent.pid, parent.comm, parent.pid
        ),
        Finding::KernelThread { thread } => kernel_thread(thread),
        Finding::Ended(x) => format!(
            "Ended after {:.1} s{}: the figures cover that time",
            x.after_s,
            x.how.as_ref().map_or(String::new(), |h| format!(" ({h})"))
        ),
        Finding::ThreadTime {
            states,
            thread_s,
            working,
        } => format!(
            "Thread time: {} (of {thread_s:.1} thread-seconds; {working:.2} threads working on average)",
            state_parts(states)
        ),
        Finding::Cpu {
            user_s,
            system_s,
            cpu_s,
            window_s,
            threads,
            processes,
        } => format!(
            "CPU: {:.2} CPUs (user {user_s:.2} s, system {system_s:.2} s in {window_s:.1} s), {threads} thread{} in {processes} process{}",
            cpu_s / window_s,
            if *threads == 1 { "" } else { "s" },
            if *processes == 1 { "" } else { "es" }
        ),
        // A share of the runnable time, not of all the thread time as
        // "waiting for a CPU N%" is: other words, so the two never read as
        // one figure that disagrees with itself.
        Finding::RunQueue { delay_s, cpu_s } => match *delay_s {
            // A share of almost no runnable time says nothing (a microsecond
            // of queueing would read 100%).
            Some(d) if cpu_s + d < 0.01 => format!("Run queue: {d:.2} s (hardly ever runnable)"),
            Some(d) => format!(
                "Run queue: {d:.2} s, {:.0}% of the time it was runnable (the rest on CPU)",
                d * 100.0 / (cpu_s + d)
            ),
            None => "Run queue: unknown (this kernel keeps no schedstats)".into(),
        },
        Finding::Storage {
            read_per_s,
            written_per_s,
            major_per_s,
            minor_per_s,
            blkio_delay_s,
        } => {
            let mut line = format!(
                "Storage: read {}/s, written {}/s; page faults: major {major_per_s:.0}/s, minor {minor_per_s:.0}/s",
                human_bytes(*read_per_s as u64),
                human_bytes(*written_per_s as u64),
            );
            if let Some(blk) = blkio_delay_s {
                line.push_str(&format!("; block-I/O delay {blk:.2} s (delay accounting)"));
            }
            line
        }
        Finding::Waits { state, of, waits } => {
            let label = match state {
                ThreadState::Storage => "Storage waits".to_string(),
                ThreadState::Lock => "Lock waits".into(),
                ThreadState::Other => "Other waits".into(),
                ThreadState::Sleeping => "Sleeping by design".into(),
                s => format!("Waits {}", s.describe()),
            };
            format!(
                "{label} ({:.0}% of the thread time): {}",
                of * 100.0,
                parts(waits)
            )
        }
        Finding::BlockedIn { waits } => format!("Blocked in: {}", parts(waits)),
        Finding::Lock { lock } => format!("Lock: {}", lock_text(lock)),
        Finding::Stopped(s) => format!(
            "Stopped: PID {} was seen stopped{}",
            s.pid,
            s.tracer_pid.map_or(String::new(), |t| format!(
                " with tracer {} (PID {t})",
                s.tracer_comm.as_deref().unwrap_or("?")
            ))
        ),
        Finding::Memory {
            first,
            last,
            end,
            trend,
        } => {
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
            if let Some(m) = end {
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
                    if t.step {
                        " (a step, not a steady growth)"
                    } else {
                        ""
                    }
                ));
            }
            line
        }
        Finding::MemoryUnread => "Memory: not read".into(),
        Finding::Periodic(p) => format!("Periodic: {}", periodic_text(p)),
        Finding::Tree {
            busiest,
            unseen_children_cpu_s,
        } => {
            let v: Vec<String> = busiest
                .iter()
                .map(|m| format!("{} (PID {}) {:.0}%", m.comm, m.pid, m.cpu_share * 100.0))
                .collect();
            let mut line = format!("Tree: {} of the tree's CPU", v.join(", "));
            if *unseen_children_cpu_s >= 0.01 {
                line.push_str(&format!(
                    "; children too short-lived to see used {unseen_children_cpu_s:.2} s"
                ));
            }
            line
        }
        Finding::SyscallsUnreadable => "Note: the threads' syscall files were unreadable (they need ptrace access: run as root or as the owner); wait points come from kernel function names".into(),
        Finding::StorageEstimated => "Note: storage time is estimated from samples; with delay accounting (sysctl kernel.task_delayacct=1, then restart the program) it is measured".into(),
        Finding::FaultReads { reads: f, window_s } => {
            let w = window_s.max(1e-3);
            format!(
                "Reads through page faults (a file read through mmap): {:.0} faults/s ({:.0} major) \
                 while it read {}/s from storage; {:.2} s of its {:.2} s in the kernel handled them \
                 and count as waiting for storage, not as CPU",
                (f.major_faults + f.minor_faults) as f64 / w,
                f.major_faults as f64 / w,
                human_bytes((f.read_bytes as f64 / w) as u64),
                f.kernel_s,
                f.system_s
            )
        }
        Finding::CpuQuota { cgroup, quota } => format!(
            "CPU quota: {} at {}: throttled in {} of {} periods, {:.2} s",
            quota_text(cgroup, quota),
            cgroup_name(cgroup),
            quota.throttled,
            quota.periods,
            quota.throttled_s
        ),
        Finding::IoLimit {
            cgroup,
            device: d,
            against,
        } => format!(
            "I/O limit: {} at {}{}",
            device(d),
            cgroup_name(cgroup),
            against.as_ref().map_or(String::new(), |a| format!(
                ": {} ({:.0}% of it)",
                against_text(a),
                a.used * 100.0
            ))
        ),
        Finding::MemoryLimit { cgroup, limit: m } => format!(
            "Memory limit: {} at {}, using {}; {}, {} refaults, {} OOM kill{}",
            memory_limit_text(m),
            cgroup_name(cgroup),
            human_bytes(m.current),
            hits(m),
            m.refaults,
            m.oom_kill,
            if m.oom_kill == 1 { "" } else { "s" }
        ),
        Finding::PidsLimit { cgroup, limit: p } => format!(
            "pids.max: {} of {} at {}{}",
            p.current,
            p.max,
            cgroup_name(cgroup),
            if p.refused > 0 {
                format!(", {} forks refused", p.refused)
            } else {
                String::new()
            }
        ),
        Finding::JvmHeap {
            heap,
            cpu_s,
            window_s,
        } => runtimes::jvm_heap_text(heap, *cpu_s, *window_s),
        Finding::RunsAs {
            what,
            name,
            pod,
            path,
        } => {
            let who = match pod {
                Some(pod) => format!("{what} in Kubernetes pod {pod}: {name}"),
                None => format!("{what} {name}"),
            };
            format!("Runs as: {who} (cgroup {path})")
        }
        Finding::NoLimit { limit, read } => format!(
            "Limits: no {} on its cgroups{}",
            match limit {
                LimitKind::CpuQuota => "CPU quota",
                LimitKind::IoLimit => "I/O limit",
            },
            places(read)
        ),
        Finding::Pressure { cgroup, pressure } => match cgroup {
            None => format!("Pressure (machine, PSI): {}", pressure_text(pressure)),
            Some(path) => format!(
                "Pressure (its cgroup {path}): {}",
                pressure_text(pressure)
            ),
        },
        Finding::Cpus(c) => format!("CPUs: {:.2} of {} idle on average", c.idle, c.cpus),
        Finding::Stalled { stall: s, window_s } => format!(
            "Stalled thread {} ({}) of PID {}: in {}, state {}, {}; its stack: {}",
            s.tid,
            s.comm,
            s.pid,
            call_text(s),
            s.state,
            s.so_far_s.map_or_else(
                || format!("has not run for {window_s:.1} s at least"),
                |t| format!("last ran {t:.1} s ago")
            ),
            if s.stack.is_empty() {
                "unreadable (needs root)".to_string()
            } else {
                s.stack.join(" → ")
            }
        ),
        Finding::Carriers { verdict, carriers } => {
            let v: Vec<String> = carriers
                .iter()
                .map(|c| format!("{} (PID {}) {:.0}%", c.comm, c.pid, c.share * 100.0))
                .collect();
            format!(
                "Members carrying `{}`: {} (the drill-downs trace them)",
                verdict.name(),
                v.join(", ")
            )
        }
    }
}

/// "busy 40% of the time in bursts of about 1.0 s, every 2.5 s".
pub fn periodic_text(p: &Periodic) -> String {
    format!(
        "busy {:.0}% of the time in bursts of about {:.1} s{}",
        p.busy_share * 100.0,
        p.burst_s,
        p.period_s
            .map_or(String::new(), |s| format!(", every {s:.1} s"))
    )
}

/// "CPU some 12%, I/O some 40% full 30%, memory some 0%".
pub fn pressure_text(p: &Pressure) -> String {
    let one = |name: &str, s: &Option<crate::model::limits::Stall>| {
        s.map(|s| {
            let full = s
                .full
                .filter(|f| *f > 0.0 || name != "CPU")
                .map_or(String::new(), |f| format!(" full {:.0}%", f * 100.0));
            format!("{name} some {:.0}%{full}", s.some * 100.0)
        })
    };
    [
        one("CPU", &p.cpu),
        one("I/O", &p.io),
        one("memory", &p.memory),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(", ")
}

/// "cause; also waiting for a CPU 35%, waiting for storage 20%".
fn with_also(text: String, also: &[StatePart]) -> String {
    if also.is_empty() {
        text
    } else {
        format!("{text}; also {}", state_parts(also))
    }
}

/// "on CPU 60%, sleeping by design 40%".
fn state_parts(v: &[StatePart]) -> String {
    v.iter()
        .map(|s| format!("{} {:.0}%", s.state.describe(), s.share * 100.0))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "mutex (futex) 75%, timer 20%".
fn parts(v: &[Part]) -> String {
    v.iter()
        .map(|p| format!("{} {:.0}%", p.what, p.share * 100.0))
        .collect::<Vec<_>>()
        .join(", ")
}

fn process(p: &Process) -> String {
    format!("PID {} ({})", p.pid, p.comm)
}

fn stopped_by(s: Option<&Stopped>) -> String {
    match s {
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
    }
}

fn kernel_thread(k: &KernelThread) -> String {
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
    line
}

/// Where a limit is set, for the user: "v1 cpu /kdiag-x", "v2 /a".
pub fn cgroup_name(c: &Cgroup) -> String {
    match c.version {
        1 => format!("v1 {} {}", c.controllers, c.path),
        _ => format!("v2 {}", c.path),
    }
}

/// " (read: v1 cpu /a, v2 /b)": the cgroups read, or that there is none.
fn places(read: &[Cgroup]) -> String {
    if read.is_empty() {
        " (it is in no cgroup but the root)".into()
    } else {
        let v: Vec<String> = read.iter().map(cgroup_name).collect();
        format!(" (read: {})", v.join(", "))
    }
}

fn quota_text(c: &Cgroup, q: &CpuQuota) -> String {
    let file = if c.version == 2 {
        "cpu.max"
    } else {
        "cpu.cfs_quota_us"
    };
    format!(
        "{:.2} CPUs ({file} {} of {} µs)",
        q.cpus().unwrap_or(0.0),
        q.quota_us.unwrap_or(0),
        q.period_us
    )
}

/// "120 reads/s against the limit of 100 read IOPS", "4.0 MiB/s written
/// against the limit of 4.0 MiB/s".
fn against_text(a: &IoAgainst) -> String {
    let (unit, name, bytes) = match a.limit {
        IoLimitKind::ReadIops => ("reads/s", "read IOPS", false),
        IoLimitKind::WriteIops => ("writes/s", "write IOPS", false),
        IoLimitKind::ReadBps => ("read", "read bytes/s", true),
        IoLimitKind::WriteBps => ("written", "write bytes/s", true),
    };
    if bytes {
        format!(
            "{}/s {unit} against the limit of {}/s",
            human_bytes(a.rate as u64),
            human_bytes(a.max)
        )
    } else {
        format!("{:.0} {unit} against the limit of {} {name}", a.rate, a.max)
    }
}

fn device(d: &Device) -> String {
    match &d.disk {
        Some(n) => format!("{n} ({})", d.device),
        None => d.device.clone(),
    }
}

fn memory_limit_text(m: &MemoryLimit) -> String {
    match (m.max, m.high) {
        (Some(max), Some(high)) => format!("max {}, high {}", human_bytes(max), human_bytes(high)),
        (Some(max), None) => human_bytes(max),
        (None, Some(high)) => format!("high {}", human_bytes(high)),
        (None, None) => "none".into(),
    }
}

/// How often the limit was hit: v1 failcnt, v2 memory.events.
fn hits(m: &MemoryLimit) -> String {
    if m.max_events + m.high_events > 0 {
        format!(
            "at max {} times, over high {} times",
            m.max_events, m.high_events
        )
    } else {
        format!("reached {} times (failcnt)", m.failcnt)
    }
}

/// "clock_nanosleep (hrtimer_nanosleep)".
fn call_text(s: &Stall) -> String {
    match (s.call.as_str(), s.wchan.as_str()) {
        ("", "") => format!("state {}", s.state),
        ("", w) => w.to_string(),
        (c, "") => c.to_string(),
        (c, w) => format!("{c} ({w})"),
    }
}

/// "20 connections wait in the accept queue of port 6379 (18 at the start)"
/// (or "of unix socket /run/x.sock").
fn waiting_text(w: &Waiting) -> String {
    let mut parts: Vec<String> = w
        .listeners
        .iter()
        .map(|l| {
            format!(
                "{} connection{} wait{} in the accept queue of {} ({} at the start)",
                l.queued_end,
                plural(l.queued_end),
                if l.queued_end == 1 { "s" } else { "" },
                l.path
                    .as_ref()
                    .map_or(format!("port {}", l.port), |p| format!("unix socket {p}")),
                l.queued_start
            )
        })
        .collect();
    if w.unread_bytes > 0 {
        parts.push(format!(
            "{} bytes lie unread on {} connected socket{}",
            w.unread_bytes,
            w.unread_sockets,
            plural(w.unread_sockets as u64)
        ));
    }
    if w.lock_waiters > 0 {
        parts.push(format!(
            "{} other thread{} waited on its mutexes",
            w.lock_waiters,
            plural(w.lock_waiters as u64)
        ));
    }
    parts.join("; ")
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[path = "verdict_runtimes.rs"]
mod runtimes;
use runtimes::{gc_text, lock_text};

#[cfg(test)]
#[path = "verdict_classify_tests.rs"]
mod classify_tests;
#[cfg(test)]
#[path = "verdict_limits_tests.rs"]
mod limits_tests;
