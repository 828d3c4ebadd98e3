//! The thread states' verdict checked against what limits the tree from
//! outside (`model::limits`): a verdict never stands beside evidence that
//! contradicts it. Waiting for a CPU while its cgroup's quota throttles it
//! is `cpu-quota`, not competition; storage waits while its cgroup's I/O
//! sits at its limit are `io-limit`, not the device; storage waits while
//! its memory cgroup is at its limit and pages come back are
//! `memory-limit`; processes the OOM killer killed are `oom-kill`; forks
//! refused at its cgroup's pids.max are `pids-limit`. When the
//! CPU waits come with idle CPUs (or no CPU pressure) and no quota, the
//! verdict says it is not competition and that no limit was found.

use crate::model::diagnosis::{Class, Confidence, Observation};
use crate::model::drill::Drill;
use crate::model::limits::{CgroupLimits, CpuQuota, IoLimit, Pressure};
use crate::model::verdict::{
    Cause, Cgroup, Device, Finding as Line, IoAgainst, IoLimitKind, LimitKind, Process,
};

/// A quota that throttled its cgroup in this share of the periods (or
/// more) explains the run-queue time.
pub const THROTTLED_SHARE: f64 = 0.1;
/// A cgroup whose requests reach this share of its I/O limit is held by it.
pub const AT_LIMIT: f64 = 0.8;
/// Of the thread time, the storage waits beside a lock queue that make a
/// binding I/O limit the lock's cause.
pub const STORAGE_BEHIND_LOCK: f64 = 0.02;
/// Pages read back after the limit evicted them, per second, that make
/// the limit the verdict (400 KiB/s of 4 KiB pages).
pub const REFAULTS_PER_S: f64 = 100.0;
/// A CPU's worth of idle time on average (half of one, at least) while the
/// target waited for a CPU: not competition for the CPUs.
pub const IDLE_CPUS: f64 = 0.5;
/// CPU pressure (some) under this share of the window: hardly any task
/// waited for a CPU.
pub const NO_PRESSURE: f64 = 0.05;

/// A verdict found in the limits, replacing the thread states'.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub verdict: Class,
    pub confidence: Confidence,
    pub cause: Cause,
    pub next: Vec<String>,
}

/// What the limits say about the thread states' verdict `class` (resting
/// on `cause`): a verdict of their own, or None when they agree.
pub fn judge(o: &Observation, class: Class, cause: &Cause) -> Option<Finding> {
    if class.spec().kept {
        return None;
    }
    if let Some(f) = oom_killed(o).or_else(|| pids_limit(o)) {
        return Some(f);
    }
    // Thrashing under a memory limit shows as storage waits, kernel time
    // (reclaim) or run-queue time, whichever the machine makes largest.
    match class {
        Class::Idle | Class::MemoryTrend => None,
        Class::Sched => memory_limit(o)
            .or_else(|| cpu_quota(o))
            .or_else(|| not_competition(o, cause)),
        Class::Io | Class::Paging => memory_limit(o).or_else(|| io_limit(o)),
        // A throttled thread is never blocked: off its CPU with no wait
        // point, under a quota it ran out of, it waits for the quota.
        Class::Blocked => memory_limit(o).or_else(|| cpu_quota(o)),
        // Threads queued on a lock whose holder writes through the limited
        // device (a commit's WAL flush): the limit is the cause, the lock
        // how it shows.
        Class::Lock => memory_limit(o).or_else(|| io_limit(o).filter(|_| writes_behind_lock(o))),
        _ => memory_limit(o),
    }
}

fn oom_killed(o: &Observation) -> Option<Finding> {
    let (c, m) = o
        .limits
        .cgroups
        .iter()
        .filter_map(|c| Some((c, c.memory.as_ref()?)))
        .filter(|(_, m)| m.oom_kill > 0)
        .max_by_key(|(_, m)| m.oom_kill)?;
    let under = pids_under(o, c);
    let ended: Vec<Process> = o
        .members
        .iter()
        .filter(|m| m.ended && under.contains(&m.pid))
        .map(|m| Process {
            pid: m.pid,
            comm: m.comm.clone(),
        })
        .collect();
    Some(Finding {
        verdict: Class::OomKill,
        confidence: Confidence::High,
        cause: Cause::OomKill {
            kills: m.oom_kill,
            cgroup: cgroup(c),
            max: m.max,
            ended,
        },
        next: vec![
            "sudo dmesg | grep -i -A2 'out of memory'".into(),
            format!("cat {}/{}", c.dir, events_file(c)),
        ],
    })
}

/// Forks refused at a cgroup's pids.max in the window: what it starts
/// cannot start, however idle or busy its threads look between attempts.
fn pids_limit(o: &Observation) -> Option<Finding> {
    let (c, p) = o
        .limits
        .cgroups
        .iter()
        .filter_map(|c| Some((c, c.pids_limit.as_ref()?)))
        .filter(|(_, p)| p.refused > 0)
        .max_by_key(|(_, p)| p.refused)?;
    Some(Finding {
        verdict: Class::PidsLimit,
        confidence: Confidence::High,
        cause: Cause::PidsLimit {
            cgroup: cgroup(c),
            limit: p.clone(),
            window_s: o.window_s,
        },
        next: vec![
            format!("cat {0}/pids.max {0}/pids.events", c.dir),
            format!("cat {}/cgroup.procs", c.dir),
        ],
    })
}

fn cpu_quota(o: &Observation) -> Option<Finding> {
    let (c, q) = o
        .limits
        .cgroups
        .iter()
        .filter_map(|c| Some((c, c.cpu.as_ref()?)))
        .filter(|(_, q)| q.quota_us.is_some() && throttled(q))
        .max_by(|a, b| share(a.1).total_cmp(&share(b.1)))?;
    let w = o.window_s.max(1e-3);
    // The run queue of the thread states: run_delay and the time a
    // throttled thread was runnable outside it.
    let queued =
        crate::analysis::tsa::budget(o).seconds(crate::model::diagnosis::ThreadState::RunQueue);
    let (used, waited) = (o.cpu_s() / w, queued / w);
    Some(Finding {
        verdict: Class::CpuQuota,
        confidence: if share(q) >= 0.5 {
            Confidence::High
        } else {
            Confidence::Medium
        },
        cause: Cause::CpuQuota {
            cgroup: cgroup(c),
            quota: q.clone(),
            used,
            waited,
        },
        next: vec![format!("cat {}/cpu.stat", c.dir), Drill::Cpu.command(o.pid)],
    })
}

/// Waiting for a CPU with CPUs idle (or no CPU pressure) and no quota:
/// the same verdict, saying it is not competition and what was looked for.
fn not_competition(o: &Observation, cause: &Cause) -> Option<Finding> {
    let idle = o.limits.cpus.filter(|c| c.idle >= IDLE_CPUS);
    let calm = pressure(o)
        .and_then(|p| p.cpu)
        .filter(|s| s.some < NO_PRESSURE);
    if idle.is_none() && calm.is_none() {
        return None;
    }
    Some(Finding {
        verdict: Class::Sched,
        confidence: Confidence::Low,
        cause: Cause::NotCompetition {
            states: Box::new(cause.clone()),
            idle,
            pressure: calm.map(|s| s.some),
            read: own_cgroups(o),
        },
        next: vec![format!("grep Cpus_allowed_list /proc/{}/status", o.pid)],
    })
}

fn io_limit(o: &Observation) -> Option<Finding> {
    let w = o.window_s.max(1e-3);
    let (c, l, against) = o
        .limits
        .cgroups
        .iter()
        .flat_map(|c| c.io.iter().map(move |l| (c, l)))
        .filter_map(|(c, l)| Some((c, l, tightest(l, w)?)))
        .max_by(|a, b| a.2.used.total_cmp(&b.2.used))?;
    let (used, kind) = (against.used, against.limit);
    if used < AT_LIMIT {
        return None;
    }
    Some(Finding {
        verdict: Class::IoLimit,
        confidence: if used >= 0.9 {
            Confidence::High
        } else {
            Confidence::Medium
        },
        cause: Cause::IoLimit {
            cgroup: cgroup(c),
            device: device(l),
            against,
        },
        next: vec![
            format!(
                "cat {}/{}",
                c.dir,
                match (c.version, kind) {
                    (2, _) => "io.max",
                    (_, IoLimitKind::ReadIops) => "blkio.throttle.read_iops_device",
                    (_, IoLimitKind::WriteIops) => "blkio.throttle.write_iops_device",
                    (_, IoLimitKind::ReadBps) => "blkio.throttle.read_bps_device",
                    (_, IoLimitKind::WriteBps) => "blkio.throttle.write_bps_device",
                }
            ),
            Drill::Storage.command(o.pid),
        ],
    })
}

/// Whether the target's threads waited for storage at least
/// STORAGE_BEHIND_LOCK of their time: a lock's holder may be the one.
fn writes_behind_lock(o: &Observation) -> bool {
    let b = crate::analysis::tsa::budget(o);
    b.total_s > 0.0
        && b.seconds(crate::model::diagnosis::ThreadState::Storage)
            >= STORAGE_BEHIND_LOCK * b.total_s
}

fn memory_limit(o: &Observation) -> Option<Finding> {
    let (c, m) = o
        .limits
        .cgroups
        .iter()
        .filter_map(|c| Some((c, c.memory.as_ref()?)))
        .filter(|(_, m)| m.max.is_some() || m.high.is_some())
        .filter(|(_, m)| m.failcnt + m.max_events + m.high_events > 0)
        .filter(|(_, m)| m.refaults as f64 >= REFAULTS_PER_S * o.window_s)
        .max_by_key(|(_, m)| m.refaults)?;
    Some(Finding {
        verdict: Class::MemoryLimit,
        confidence: Confidence::High,
        cause: Cause::MemoryLimit {
            cgroup: cgroup(c),
            limit: m.clone(),
            window_s: o.window_s,
        },
        next: vec![
            format!("cat {}/memory.stat", c.dir),
            Drill::Storage.command(o.pid),
        ],
    })
}

/// One evidence line per limit found, the pressure, and for a verdict
/// about CPU or storage waits, what was looked for when nothing was found.
pub fn evidence(o: &Observation, verdict: Class) -> Vec<Line> {
    let w = o.window_s.max(1e-3);
    let mut e = Vec::new();
    for c in &o.limits.cgroups {
        if let Some(q) = c.cpu.as_ref().filter(|q| q.quota_us.is_some()) {
            e.push(Line::CpuQuota {
                cgroup: cgroup(c),
                quota: q.clone(),
            });
        }
        for l in &c.io {
            e.push(Line::IoLimit {
                cgroup: cgroup(c),
                device: device(l),
                against: tightest(l, w),
            });
        }
        if let Some(m) = c
            .memory
            .as_ref()
            .filter(|m| m.max.is_some() || m.high.is_some())
        {
            e.push(Line::MemoryLimit {
                cgroup: cgroup(c),
                limit: m.clone(),
            });
        }
        if let Some(p) = &c.pids_limit {
            e.push(Line::PidsLimit {
                cgroup: cgroup(c),
                limit: p.clone(),
            });
        }
    }
    if let Some(r) = runs_as(o) {
        e.push(r);
    }
    let none = |limit| Line::NoLimit {
        limit,
        read: own_cgroups(o),
    };
    match verdict {
        Class::Sched if !has(o, |c| c.cpu.as_ref().is_some_and(|q| q.quota_us.is_some())) => {
            e.push(none(LimitKind::CpuQuota))
        }
        Class::Io | Class::Paging if !has(o, |c| !c.io.is_empty()) => {
            e.push(none(LimitKind::IoLimit))
        }
        _ => {}
    }
    if let Some(p) = &o.limits.pressure {
        e.push(Line::Pressure {
            cgroup: None,
            pressure: p.clone(),
        });
    }
    for c in o.limits.cgroups.iter().filter(|c| !c.ancestor) {
        if let Some(p) = &c.pressure {
            e.push(Line::Pressure {
                cgroup: Some(c.path.clone()),
                pressure: p.clone(),
            });
        }
    }
    if let Some(c) = o
        .limits
        .cpus
        .filter(|_| matches!(verdict, Class::Sched | Class::CpuQuota))
    {
        e.push(Line::Cpus(c));
    }
    e
}

/// The pressure closest to the target: its v2 cgroup's, else the machine's.
fn pressure(o: &Observation) -> Option<&Pressure> {
    o.limits
        .cgroups
        .iter()
        .filter(|c| !c.ancestor)
        .find_map(|c| c.pressure.as_ref())
        .or(o.limits.pressure.as_ref())
}

fn throttled(q: &CpuQuota) -> bool {
    q.throttled > 0 && share(q) >= THROTTLED_SHARE
}

fn share(q: &CpuQuota) -> f64 {
    q.throttled as f64 / q.periods.max(1) as f64
}

/// The limit the cgroup came closest to on a device, in the window.
fn tightest(l: &IoLimit, w: f64) -> Option<IoAgainst> {
    let rate = |n: u64| n as f64 / w;
    [
        (l.read_iops, rate(l.reads), IoLimitKind::ReadIops),
        (l.write_iops, rate(l.writes), IoLimitKind::WriteIops),
        (l.read_bps, rate(l.read_bytes), IoLimitKind::ReadBps),
        (l.write_bps, rate(l.write_bytes), IoLimitKind::WriteBps),
    ]
    .into_iter()
    .filter_map(|(max, rate, limit)| {
        let max = max.filter(|&x| x > 0)?;
        Some(IoAgainst {
            limit,
            rate,
            max,
            used: rate / max as f64,
        })
    })
    .max_by(|a, b| a.used.total_cmp(&b.used))
}

fn device(l: &IoLimit) -> Device {
    Device {
        device: l.device.clone(),
        disk: l.disk.clone(),
    }
}

fn cgroup(c: &CgroupLimits) -> Cgroup {
    Cgroup {
        version: c.version,
        controllers: c.controllers.clone(),
        path: c.path.clone(),
    }
}

fn events_file(c: &CgroupLimits) -> &'static str {
    if c.version == 2 {
        "memory.events"
    } else {
        "memory.oom_control"
    }
}

fn has(o: &Observation, f: impl Fn(&CgroupLimits) -> bool) -> bool {
    o.limits.cgroups.iter().any(f)
}

/// The target's own cgroups (none: it is in no cgroup but the root).
fn own_cgroups(o: &Observation) -> Vec<Cgroup> {
    o.limits
        .cgroups
        .iter()
        .filter(|c| !c.ancestor)
        .map(cgroup)
        .collect()
}

/// The members in cgroup `c` or below it (in the same hierarchy).
fn pids_under(o: &Observation, c: &CgroupLimits) -> Vec<i32> {
    let below = |p: &str| {
        p == c.path
            || p.strip_prefix(c.path.as_str())
                .is_some_and(|r| r.starts_with('/'))
    };
    o.limits
        .cgroups
        .iter()
        .filter(|x| x.version == c.version && x.controllers == c.controllers && below(&x.path))
        .flat_map(|x| x.pids.iter().copied())
        .collect()
}

/// Who it runs as, from its own cgroups: the v2 one first, then v1's
/// (systemd's first).
fn runs_as(o: &Observation) -> Option<Line> {
    let mut own: Vec<&CgroupLimits> = o.limits.cgroups.iter().filter(|c| !c.ancestor).collect();
    own.sort_by_key(|c| (c.version != 2, c.controllers != "name=systemd"));
    own.iter().find_map(|c| {
        let r = crate::analysis::runs_as::runs_as(&c.path)?;
        Some(Line::RunsAs {
            what: r.what.to_string(),
            name: r.name,
            pod: r.pod,
            path: c.path.clone(),
        })
    })
}
