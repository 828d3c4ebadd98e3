//! The thread states' verdict checked against what limits the tree from
//! outside (`model::limits`): a verdict never stands beside evidence that
//! contradicts it. Waiting for a CPU while its cgroup's quota throttles it
//! is `cpu-quota`, not competition; storage waits while its cgroup's I/O
//! sits at its limit are `io-limit`, not the device; storage waits while
//! its memory cgroup is at its limit and pages come back are
//! `memory-limit`; processes the OOM killer killed are `oom-kill`. When the
//! CPU waits come with idle CPUs (or no CPU pressure) and no quota, the
//! verdict says it is not competition and that no limit was found.

use crate::analysis::io_pattern::human_bytes;
use crate::analysis::why::Drill;
use crate::model::diagnosis::{Class, Confidence, Observation};
use crate::model::limits::{CgroupLimits, CpuQuota, IoLimit, MemoryLimit, Pressure, Stall};

/// A quota that throttled its cgroup in this share of the periods (or
/// more) explains the run-queue time.
pub const THROTTLED_SHARE: f64 = 0.1;
/// A cgroup whose requests reach this share of its I/O limit is held by it.
pub const AT_LIMIT: f64 = 0.8;
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
    pub summary: String,
    pub next: Vec<String>,
}

/// What the limits say about the thread states' verdict `class` (whose
/// summary is `summary`): a verdict of their own, or None when they agree.
pub fn judge(o: &Observation, class: Class, summary: &str) -> Option<Finding> {
    if matches!(class, Class::Zombie | Class::Stopped | Class::Exec) {
        return None;
    }
    if let Some(f) = oom_killed(o) {
        return Some(f);
    }
    // Thrashing under a memory limit shows as storage waits, kernel time
    // (reclaim) or run-queue time, whichever the machine makes largest.
    match class {
        Class::Idle | Class::MemoryTrend => None,
        Class::Sched => memory_limit(o)
            .or_else(|| cpu_quota(o))
            .or_else(|| not_competition(o, summary)),
        Class::Io | Class::Paging => memory_limit(o).or_else(|| io_limit(o)),
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
    let killed: Vec<String> = o
        .members
        .iter()
        .filter(|m| m.ended && under.contains(&m.pid))
        .map(|m| format!("PID {} ({})", m.pid, m.comm))
        .collect();
    let whom = if killed.is_empty() {
        "none of the tree's members ended: the victims were other processes of the cgroup".into()
    } else {
        format!("the tree's members that ended: {}", killed.join(", "))
    };
    Some(Finding {
        verdict: Class::OomKill,
        confidence: Confidence::High,
        summary: format!(
            "the OOM killer killed {} process{} in its memory cgroup {}{}; {whom}",
            m.oom_kill,
            if m.oom_kill == 1 { "" } else { "es" },
            c.name(),
            m.max
                .map_or(String::new(), |x| format!(" (limit {})", human_bytes(x)))
        ),
        next: vec![
            "sudo dmesg | grep -i -A2 'out of memory'".into(),
            format!("cat {}/{}", c.dir, events_file(c)),
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
    let (used, waited) = (o.cpu_s() / w, o.totals.run_delay_s.unwrap_or(0.0) / w);
    Some(Finding {
        verdict: Class::CpuQuota,
        confidence: if share(q) >= 0.5 {
            Confidence::High
        } else {
            Confidence::Medium
        },
        summary: format!(
            "throttled by its CPU quota: {} at {}, throttled in {} of {} periods; it used {used:.2} CPUs and waited {waited:.2} CPUs' worth for its quota to refill, not for other processes",
            quota_text(c, q),
            c.name(),
            q.throttled,
            q.periods,
        ),
        next: vec![format!("cat {}/cpu.stat", c.dir), Drill::Cpu.command(o.pid)],
    })
}

/// Waiting for a CPU with CPUs idle (or no CPU pressure) and no quota:
/// the same verdict, saying it is not competition and what was looked for.
fn not_competition(o: &Observation, summary: &str) -> Option<Finding> {
    let idle = o.limits.cpus.filter(|c| c.idle >= IDLE_CPUS);
    let calm = pressure(o)
        .and_then(|p| p.cpu)
        .filter(|s| s.some < NO_PRESSURE);
    if idle.is_none() && calm.is_none() {
        return None;
    }
    let why = match (idle, calm) {
        (Some(c), _) => format!("{:.1} of {} CPUs stood idle on average", c.idle, c.cpus),
        (None, Some(s)) => format!("CPU pressure was {:.0}% (PSI some)", s.some * 100.0),
        _ => unreachable!(),
    };
    Some(Finding {
        verdict: Class::Sched,
        confidence: Confidence::Low,
        summary: format!(
            "{summary}; but {why}: not competition for the CPUs, and no CPU quota throttled its cgroups{}",
            quota_places(o)
        ),
        next: vec![format!("grep Cpus_allowed_list /proc/{}/status", o.pid)],
    })
}

fn io_limit(o: &Observation) -> Option<Finding> {
    let w = o.window_s.max(1e-3);
    let (c, l, what, used) = o
        .limits
        .cgroups
        .iter()
        .flat_map(|c| c.io.iter().map(move |l| (c, l)))
        .filter_map(|(c, l)| {
            let (what, used) = tightest(l, w)?;
            Some((c, l, what, used))
        })
        .max_by(|a, b| a.3.total_cmp(&b.3))?;
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
        summary: format!(
            "I/O limited by its cgroup: {what} on {} ({:.0}% of it) at {}: it waits for the limit, not for the device",
            disk(l),
            used * 100.0,
            c.name()
        ),
        next: vec![
            format!(
                "cat {}/{}",
                c.dir,
                if c.version == 2 {
                    "io.max"
                } else {
                    "blkio.throttle.read_iops_device"
                }
            ),
            Drill::Storage.command(o.pid),
        ],
    })
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
        summary: format!(
            "reclaim under its memory limit: {} at {}, {}, {} pages evicted and read again (refaults) in {:.1} s: its working set does not fit, and it waits for storage to read back what the limit evicted",
            memory_limit_text(m),
            c.name(),
            hits(m),
            m.refaults,
            o.window_s
        ),
        next: vec![
            format!("cat {}/memory.stat", c.dir),
            Drill::Storage.command(o.pid),
        ],
    })
}

/// One evidence line per limit found, the pressure, and for a verdict
/// about CPU or storage waits, what was looked for when nothing was found.
pub fn evidence(o: &Observation, verdict: Class) -> Vec<String> {
    let w = o.window_s.max(1e-3);
    let mut e = Vec::new();
    for c in &o.limits.cgroups {
        if let Some(q) = c.cpu.as_ref().filter(|q| q.quota_us.is_some()) {
            e.push(format!(
                "CPU quota: {} at {}: throttled in {} of {} periods, {:.2} s",
                quota_text(c, q),
                c.name(),
                q.throttled,
                q.periods,
                q.throttled_s
            ));
        }
        for l in &c.io {
            let used = tightest(l, w).map_or(String::new(), |(what, used)| {
                format!(": {what} ({:.0}% of it)", used * 100.0)
            });
            e.push(format!("I/O limit: {} at {}{used}", disk(l), c.name()));
        }
        if let Some(m) = c
            .memory
            .as_ref()
            .filter(|m| m.max.is_some() || m.high.is_some())
        {
            e.push(format!(
                "Memory limit: {} at {}, using {}; {}, {} refaults, {} OOM kill{}",
                memory_limit_text(m),
                c.name(),
                human_bytes(m.current),
                hits(m),
                m.refaults,
                m.oom_kill,
                if m.oom_kill == 1 { "" } else { "s" }
            ));
        }
        if let Some(p) = &c.pids_limit {
            e.push(format!(
                "pids.max: {} of {} at {}{}",
                p.current,
                p.max,
                c.name(),
                if p.refused > 0 {
                    format!(", {} forks refused", p.refused)
                } else {
                    String::new()
                }
            ));
        }
    }
    if let Some(r) = runs_as(o) {
        e.push(r);
    }
    let none = |what: &str| format!("Limits: no {what} on its cgroups{}", quota_places(o));
    match verdict {
        Class::Sched if !has(o, |c| c.cpu.as_ref().is_some_and(|q| q.quota_us.is_some())) => {
            e.push(none("CPU quota"))
        }
        Class::Io | Class::Paging if !has(o, |c| !c.io.is_empty()) => e.push(none("I/O limit")),
        _ => {}
    }
    if let Some(p) = &o.limits.pressure {
        e.push(format!("Pressure (machine, PSI): {}", pressure_text(p)));
    }
    for c in o.limits.cgroups.iter().filter(|c| !c.ancestor) {
        if let Some(p) = &c.pressure {
            e.push(format!(
                "Pressure (its cgroup {}): {}",
                c.path,
                pressure_text(p)
            ));
        }
    }
    if let Some(c) = o
        .limits
        .cpus
        .filter(|_| matches!(verdict, Class::Sched | Class::CpuQuota))
    {
        e.push(format!("CPUs: {:.2} of {} idle on average", c.idle, c.cpus));
    }
    e
}

/// "CPU some 12%, I/O some 40% full 30%, memory some 0%".
pub fn pressure_text(p: &Pressure) -> String {
    let one = |name: &str, s: &Option<Stall>| {
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

fn quota_text(c: &CgroupLimits, q: &CpuQuota) -> String {
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

/// The limit the cgroup came closest to on a device, in the window: its
/// text and the share used.
fn tightest(l: &IoLimit, w: f64) -> Option<(String, f64)> {
    let rate = |n: u64| n as f64 / w;
    [
        (l.read_iops, rate(l.reads), "reads/s", "read IOPS", false),
        (
            l.write_iops,
            rate(l.writes),
            "writes/s",
            "write IOPS",
            false,
        ),
        (l.read_bps, rate(l.read_bytes), "read", "read bytes/s", true),
        (
            l.write_bps,
            rate(l.write_bytes),
            "written",
            "write bytes/s",
            true,
        ),
    ]
    .into_iter()
    .filter_map(|(limit, r, unit, name, bytes)| {
        let limit = limit.filter(|&x| x > 0)?;
        let text = if bytes {
            format!(
                "{}/s {unit} against the limit of {}/s",
                human_bytes(r as u64),
                human_bytes(limit)
            )
        } else {
            format!("{r:.0} {unit} against the limit of {limit} {name}")
        };
        Some((text, r / limit as f64))
    })
    .max_by(|a, b| a.1.total_cmp(&b.1))
}

fn disk(l: &IoLimit) -> String {
    match &l.disk {
        Some(d) => format!("{d} ({})", l.device),
        None => l.device.clone(),
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

/// " (looked at v1 cpu /a, v2 /b)": the cgroups read, or nothing to say.
fn quota_places(o: &Observation) -> String {
    let own: Vec<String> = o
        .limits
        .cgroups
        .iter()
        .filter(|c| !c.ancestor)
        .map(CgroupLimits::name)
        .collect();
    if own.is_empty() {
        " (it is in no cgroup but the root)".into()
    } else {
        format!(" (read: {})", own.join(", "))
    }
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

/// "Runs as: systemd service nginx (cgroup /system.slice/nginx.service)",
/// from its own cgroups: the v2 one first, then v1's (systemd's first).
fn runs_as(o: &Observation) -> Option<String> {
    let mut own: Vec<&CgroupLimits> = o.limits.cgroups.iter().filter(|c| !c.ancestor).collect();
    own.sort_by_key(|c| (c.version != 2, c.controllers != "name=systemd"));
    own.iter().find_map(|c| {
        let r = crate::analysis::runs_as::runs_as(&c.path)?;
        Some(format!("Runs as: {} (cgroup {})", r.text(), c.path))
    })
}

#[cfg(test)]
#[path = "limits_tests.rs"]
mod tests;
