//! What limits the tree from outside, for diagnose and for each of
//! watch's groups: the cgroups of each member (every hierarchy, v1 and v2,
//! found when the member is first seen) and their ancestors that set a
//! limit, read when first seen and at the end of the window (or of each of
//! watch's intervals); the machine's pressure and idle CPUs at both ends.
//! Counters become the change over the window (`model::limits`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::model::limits::{
    CgroupLimits, CpuQuota, IoLimit, Limits, MemoryLimit, PidsLimit, Pressure, Stall, SystemCpus,
};
use crate::sys::cgroupfs::{self, Mount, Place, StallTotals};
use crate::sys::monotonic_ns;

/// Stall totals of cpu, io and memory pressure.
type Psi = [Option<StallTotals>; 3];

/// The v1 hierarchies read (others, like freezer or devices, limit nothing
/// diagnose can see); `name=systemd` only names the unit.
const V1_READ: [&str; 5] = ["cpu", "memory", "blkio", "pids", "name=systemd"];

pub struct LimitWatch {
    mounts: Vec<Mount>,
    cgroups: BTreeMap<PathBuf, Entry>,
    seen: HashSet<i32>,
    system: System,
    t0: u64,
}

/// The machine's pressure, and its idle and all CPU ticks.
type System = (Option<Psi>, Option<(u64, u64)>);

struct Entry {
    place: Place,
    /// The members in it (none: only an ancestor of a member's cgroup).
    pids: Vec<i32>,
    start: Counters,
    /// When it was first read (monotonic ns).
    since: u64,
}

/// What was read at one moment, shared by the watches that end an
/// interval then: watch's groups read each cgroup (an ancestor many share,
/// the machine's pressure) once a scan, not once a group.
pub struct Reads {
    at: u64,
    counters: HashMap<PathBuf, Counters>,
    system: Option<System>,
}

impl Reads {
    pub fn now() -> Reads {
        Reads {
            at: monotonic_ns(),
            counters: HashMap::new(),
            system: None,
        }
    }
}

/// The counters of one cgroup at one moment.
#[derive(Default, Clone)]
struct Counters {
    cpu: CpuCounters,
    /// Per device: reads, writes, read bytes, write bytes.
    io: BTreeMap<String, [u64; 4]>,
    failcnt: u64,
    events: [u64; 4],
    refaults: u64,
    pids_refused: u64,
    pressure: Psi,
}

impl LimitWatch {
    /// Start with the target's first members.
    pub fn start(pids: &[i32]) -> LimitWatch {
        let mut w = LimitWatch::new(cgroupfs::mounts());
        w.scan(pids);
        w
    }

    /// Start with no member, in the hierarchies `mounts`.
    pub fn new(mounts: Vec<Mount>) -> LimitWatch {
        LimitWatch {
            mounts,
            cgroups: BTreeMap::new(),
            seen: HashSet::new(),
            system: (system_pressure(), cpu_ticks()),
            t0: monotonic_ns(),
        }
    }

    /// Place members not seen before (their cgroups' counters start now).
    pub fn scan(&mut self, pids: &[i32]) {
        for &pid in pids {
            self.place(pid, None);
        }
    }

    /// Place member `pid`, if not seen before, from its /proc/PID/cgroup
    /// `text` when the caller has read it already.
    pub fn place(&mut self, pid: i32, text: Option<&str>) {
        if !self.seen.insert(pid) {
            return;
        }
        let read = match text {
            Some(_) => None,
            None => cgroupfs::read(Path::new(&format!("/proc/{pid}")), "cgroup"),
        };
        let Some(text) = text.or(read.as_deref()) else {
            return;
        };
        for place in cgroupfs::places(text, &self.mounts) {
            if !place.v2
                && !place
                    .controllers
                    .iter()
                    .any(|c| V1_READ.contains(&c.as_str()))
            {
                continue;
            }
            let top = cgroupfs::mount_dir(&place, &self.mounts)
                .unwrap_or(&place.dir)
                .to_path_buf();
            // The root sets no limit, and its counters are the machine's.
            let up = place.ancestors(&top).into_iter().enumerate();
            for (i, p) in up.filter(|(_, p)| p.path != "/") {
                let e = self.cgroups.entry(p.dir.clone()).or_insert_with(|| Entry {
                    start: counters(&p),
                    place: p,
                    pids: vec![],
                    since: monotonic_ns(),
                });
                if i == 0 {
                    e.pids.push(pid);
                }
            }
        }
    }

    /// Forget the members not in `pids` (ended, or gone to another of
    /// watch's groups), and the cgroups no member is in or under.
    pub fn keep(&mut self, pids: &HashSet<i32>) {
        self.seen.retain(|p| pids.contains(p));
        for e in self.cgroups.values_mut() {
            e.pids.retain(|p| pids.contains(p));
        }
        let own: Vec<PathBuf> = (self.cgroups.iter())
            .filter(|(_, e)| !e.pids.is_empty())
            .map(|(d, _)| d.clone())
            .collect();
        self.cgroups
            .retain(|d, _| own.iter().any(|o| o.starts_with(d)));
    }

    /// The limits and what they did, from first sight to now.
    pub fn finish(mut self) -> Limits {
        self.interval(&mut Reads::now())
    }

    /// The limits and what they did since the last call (since first
    /// sight, the first time), counting again from now: one of watch's
    /// intervals. `now` keeps what was read at this moment for the others.
    pub fn interval(&mut self, now: &mut Reads) -> Limits {
        let secs = |since: u64| (now.at.saturating_sub(since) as f64 / 1e9).max(1e-3);
        let mut cgroups = Vec::new();
        for (dir, e) in self.cgroups.iter_mut() {
            let end = (now.counters)
                .entry(dir.clone())
                .or_insert_with(|| counters(&e.place))
                .clone();
            let c = limits_of(e, &end, secs(e.since));
            (e.start, e.since) = (end, now.at);
            let limits_something = c.cpu.as_ref().is_some_and(|q| q.quota_us.is_some())
                || !c.io.is_empty()
                || c.memory
                    .as_ref()
                    .is_some_and(|m| m.max.is_some() || m.high.is_some() || m.oom_kill > 0)
                || c.pids_limit.is_some();
            if limits_something || !e.pids.is_empty() {
                cgroups.push(c);
            }
        }
        let end = *now
            .system
            .get_or_insert_with(|| (system_pressure(), cpu_ticks()));
        let ((pressure, cpus), window) = (std::mem::replace(&mut self.system, end), secs(self.t0));
        self.t0 = now.at;
        Limits {
            cgroups,
            pressure: pressure.zip(end.0).map(|(a, b)| stalls(&a, &b, window)),
            cpus: cpus.zip(end.1).map(|((i0, t0), (i1, t1))| {
                let n = cpu_count();
                SystemCpus {
                    cpus: n,
                    idle: n as f64 * (i1.saturating_sub(i0)) as f64
                        / (t1.saturating_sub(t0)).max(1) as f64,
                }
            }),
        }
    }
}

fn limits_of(e: &Entry, end: &Counters, secs: f64) -> CgroupLimits {
    let (p, s) = (&e.place, &e.start);
    let d = |a: u64, b: u64| b.saturating_sub(a);
    let read = |f: &str| cgroupfs::read(&p.dir, f);
    let cpu = p.has("cpu").then(|| cpu_quota(p, &s.cpu, &end.cpu));
    let io = io_limits(p)
        .into_iter()
        .map(|mut l| {
            let zero = [0; 4];
            let (a, b) = (
                s.io.get(&l.device).unwrap_or(&zero),
                end.io.get(&l.device).unwrap_or(&zero),
            );
            [l.reads, l.writes, l.read_bytes, l.write_bytes] = [0, 1, 2, 3].map(|i| d(a[i], b[i]));
            l.disk = disk_name(&l.device);
            l
        })
        .collect();
    let memory = p.has("memory").then(|| {
        let n = |f: &str| {
            read(f)
                .and_then(|t| t.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        let lim = |f: &str| read(f).and_then(|t| cgroupfs::limit(&t));
        MemoryLimit {
            max: lim(if p.v2 {
                "memory.max"
            } else {
                "memory.limit_in_bytes"
            }),
            high: if p.v2 { lim("memory.high") } else { None },
            current: n(if p.v2 {
                "memory.current"
            } else {
                "memory.usage_in_bytes"
            }),
            failcnt: d(s.failcnt, end.failcnt),
            high_events: d(s.events[0], end.events[0]),
            max_events: d(s.events[1], end.events[1]),
            oom: d(s.events[2], end.events[2]),
            oom_kill: d(s.events[3], end.events[3]),
            refaults: d(s.refaults, end.refaults),
        }
    });
    let pids_limit = p.has("pids").then_some(()).and_then(|()| {
        Some(PidsLimit {
            max: read("pids.max").and_then(|t| cgroupfs::limit(&t))?,
            current: read("pids.current")
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(0),
            refused: d(s.pids_refused, end.pids_refused),
        })
    });
    let pressure = (p.v2 && s.pressure.iter().any(Option::is_some))
        .then(|| stalls(&s.pressure, &end.pressure, secs));
    CgroupLimits {
        version: if p.v2 { 2 } else { 1 },
        controllers: p.controllers.join(","),
        path: p.path.clone(),
        dir: p.dir.display().to_string(),
        pids: e.pids.clone(),
        ancestor: e.pids.is_empty(),
        cpu,
        io,
        memory,
        pids_limit,
        pressure,
    }
}

/// The I/O limits set on a cgroup, one per device (counters zero).
fn io_limits(p: &Place) -> Vec<IoLimit> {
    let mut out: BTreeMap<String, IoLimit> = BTreeMap::new();
    let mut set = |dev: &str, key: &str, v: Option<u64>| {
        let l = out.entry(dev.to_string()).or_insert_with(|| IoLimit {
            device: dev.to_string(),
            ..Default::default()
        });
        match key {
            "riops" => l.read_iops = v,
            "wiops" => l.write_iops = v,
            "rbps" => l.read_bps = v,
            "wbps" => l.write_bps = v,
            _ => {}
        }
    };
    if p.v2 {
        for (dev, keys) in
            cgroupfs::per_device(&cgroupfs::read(&p.dir, "io.max").unwrap_or_default())
        {
            for (k, v) in keys {
                set(&dev, &k, v);
            }
        }
    } else if p.has("blkio") {
        for (file, key) in [
            ("blkio.throttle.read_iops_device", "riops"),
            ("blkio.throttle.write_iops_device", "wiops"),
            ("blkio.throttle.read_bps_device", "rbps"),
            ("blkio.throttle.write_bps_device", "wbps"),
        ] {
            for (dev, _, v) in
                cgroupfs::v1_device_lines(&cgroupfs::read(&p.dir, file).unwrap_or_default())
            {
                set(&dev, key, Some(v));
            }
        }
    }
    out.into_values()
        .filter(|l| {
            l.read_iops.is_some()
                || l.write_iops.is_some()
                || l.read_bps.is_some()
                || l.write_bps.is_some()
        })
        .collect()
}

/// A cgroup's CFS bandwidth counters (cpu.stat): periods with runnable
/// tasks, those throttled, and the time throttled (ns).
#[derive(Default, Clone, Copy)]
pub struct CpuCounters {
    pub periods: u64,
    pub throttled: u64,
    pub throttled_ns: u64,
}

pub fn cpu_counters(p: &Place) -> CpuCounters {
    let stat = cgroupfs::read(&p.dir, "cpu.stat").unwrap_or_default();
    let k = |key| cgroupfs::keyed(&stat, key).unwrap_or(0);
    CpuCounters {
        periods: k("nr_periods"),
        throttled: k("nr_throttled"),
        throttled_ns: if p.v2 {
            k("throttled_usec") * 1000
        } else {
            k("throttled_time")
        },
    }
}

/// A cgroup's CPU quota (v2 cpu.max, v1 cfs_quota_us and cfs_period_us)
/// and what it did between two reads of its counters: diagnose's window,
/// or one of watch's intervals.
pub fn cpu_quota(p: &Place, start: &CpuCounters, end: &CpuCounters) -> CpuQuota {
    let read = |f: &str| cgroupfs::read(&p.dir, f);
    let (quota_us, period_us) = if p.v2 {
        let t = read("cpu.max").unwrap_or_default();
        let mut w = t.split_whitespace();
        let q = w.next().and_then(cgroupfs::limit);
        (q, w.next().and_then(|x| x.parse().ok()).unwrap_or(100_000))
    } else {
        (
            read("cpu.cfs_quota_us").and_then(|t| cgroupfs::limit(&t)),
            read("cpu.cfs_period_us")
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(100_000),
        )
    };
    let d = |a: u64, b: u64| b.saturating_sub(a);
    CpuQuota {
        quota_us,
        period_us,
        periods: d(start.periods, end.periods),
        throttled: d(start.throttled, end.throttled),
        throttled_s: d(start.throttled_ns, end.throttled_ns) as f64 / 1e9,
    }
}

fn counters(p: &Place) -> Counters {
    let read = |f: &str| cgroupfs::read(&p.dir, f).unwrap_or_default();
    let mut c = Counters::default();
    if p.has("cpu") {
        c.cpu = cpu_counters(p);
    }
    if p.v2 {
        for (dev, keys) in cgroupfs::per_device(&read("io.stat")) {
            let k = |name: &str| {
                keys.iter()
                    .find(|(n, _)| n == name)
                    .and_then(|(_, v)| *v)
                    .unwrap_or(0)
            };
            c.io.insert(dev, [k("rios"), k("wios"), k("rbytes"), k("wbytes")]);
        }
    } else if p.has("blkio") {
        // The _recursive files count the cgroup's descendants too (an
        // ancestor's limit binds their sum).
        let pick = |f: &str| {
            let r = read(&format!("{f}_recursive"));
            if r.is_empty() { read(f) } else { r }
        };
        for (slot, file) in [
            (0, "blkio.throttle.io_serviced"),
            (2, "blkio.throttle.io_service_bytes"),
        ] {
            for (dev, op, n) in cgroupfs::v1_device_lines(&pick(file)) {
                let e = c.io.entry(dev).or_default();
                match op.as_str() {
                    "Read" => e[slot] = n,
                    "Write" => e[slot + 1] = n,
                    _ => {}
                }
            }
        }
    }
    if p.has("memory") {
        let stat = read("memory.stat");
        let k = |key| cgroupfs::keyed(&stat, key);
        if p.v2 {
            let ev = read("memory.events");
            c.events =
                ["high", "max", "oom", "oom_kill"].map(|e| cgroupfs::keyed(&ev, e).unwrap_or(0));
            c.refaults = k("workingset_refault_anon").unwrap_or(0)
                + k("workingset_refault_file").unwrap_or(0);
        } else {
            c.failcnt = read("memory.failcnt").trim().parse().unwrap_or(0);
            c.events[3] = cgroupfs::keyed(&read("memory.oom_control"), "oom_kill").unwrap_or(0);
            c.refaults = match k("total_workingset_refault_file") {
                Some(f) => f + k("total_workingset_refault_anon").unwrap_or(0),
                None => k("total_workingset_refault").unwrap_or(0),
            };
        }
    }
    if p.has("pids") {
        // v1's pids.events has the same `max` counter (not in the root).
        c.pids_refused = cgroupfs::keyed(&read("pids.events"), "max").unwrap_or(0);
    }
    if p.v2 {
        c.pressure = ["cpu.pressure", "io.pressure", "memory.pressure"]
            .map(|f| cgroupfs::pressure(&read(f)));
    }
    c
}

fn system_pressure() -> Option<Psi> {
    let read = |f: &str| {
        std::fs::read_to_string(format!("/proc/pressure/{f}"))
            .ok()
            .and_then(|t| cgroupfs::pressure(&t))
    };
    let p = ["cpu", "io", "memory"].map(read);
    p.iter().any(Option::is_some).then_some(p)
}

/// Stall totals at two moments as shares of the `secs` between them.
fn stalls(a: &Psi, b: &Psi, secs: f64) -> Pressure {
    let share = |x: u64, y: u64| (y.saturating_sub(x) as f64 / 1e6 / secs).min(1.0);
    let stall = |i: usize| {
        let ((s0, f0), (s1, f1)) = (a[i]?, b[i]?);
        Some(Stall {
            some: share(s0, s1),
            // The kernel gives cpu "full" as zeros where it has no meaning.
            full: f0.zip(f1).map(|(x, y)| share(x, y)),
        })
    };
    Pressure {
        cpu: stall(0),
        io: stall(1),
        memory: stall(2),
    }
}

/// Idle (idle + iowait) and all ticks of every CPU (/proc/stat).
fn cpu_ticks() -> Option<(u64, u64)> {
    let b = std::fs::read("/proc/stat").ok()?;
    let (t, _) = crate::sys::procfs::parse::proc_stat(&b);
    let all = t.user + t.nice + t.system + t.idle + t.iowait + t.irq + t.softirq + t.steal;
    (all > 0).then_some((t.idle + t.iowait, all))
}

fn cpu_count() -> usize {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as usize
}

/// "vda" for "254:0" (/sys/dev/block/MAJ:MIN links to the device).
fn disk_name(dev: &str) -> Option<String> {
    let node = std::fs::canonicalize(format!("/sys/dev/block/{dev}")).ok()?;
    Some(node.file_name()?.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The captured v2 cgroup at `stage` (start or end of the window).
    fn place(stage: &str) -> Place {
        Place {
            v2: true,
            controllers: vec![],
            path: "/system.slice/web.service".into(),
            dir: Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/cgroupfs/v2")
                .join(stage)
                .join("system.slice/web.service"),
        }
    }

    #[test]
    fn a_v2_cgroup_read_at_both_ends() {
        let e = Entry {
            start: counters(&place("start")),
            place: place("end"),
            pids: vec![7],
            since: 0,
        };
        let c = limits_of(&e, &counters(&place("end")), 3.0);
        assert_eq!(
            (c.version, c.path.as_str()),
            (2, "/system.slice/web.service")
        );
        assert_eq!(
            c.cpu,
            Some(CpuQuota {
                quota_us: Some(20_000),
                period_us: 100_000,
                periods: 30,
                throttled: 30,
                throttled_s: 2.4,
            })
        );
        assert_eq!(c.io.len(), 1);
        let io = &c.io[0];
        assert_eq!(
            (io.device.as_str(), io.read_iops, io.write_iops),
            ("254:0", Some(200), None)
        );
        assert_eq!((io.reads, io.read_bytes), (600, 2_457_600));
        let m = c.memory.unwrap();
        assert_eq!(
            (m.max, m.high, m.current),
            (Some(50_331_648), None, 50_311_168)
        );
        assert_eq!(
            (m.max_events, m.oom, m.oom_kill, m.refaults),
            (900, 1, 1, 60_012)
        );
        let p = c.pids_limit.unwrap();
        assert_eq!((p.max, p.current, p.refused), (64, 3, 2));
        let psi = c.pressure.unwrap();
        let cpu = psi.cpu.unwrap();
        assert!((cpu.some - 0.8).abs() < 1e-9, "{cpu:?}");
        let io = psi.io.unwrap();
        assert!((io.some - 0.95).abs() < 1e-9 && (io.full.unwrap() - 0.9).abs() < 1e-9);
    }
}
