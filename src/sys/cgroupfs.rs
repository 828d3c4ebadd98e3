//! Reading cgroups (not making them: that is `sys::cgroup`): where a
//! process's cgroups are, in the unified (v2) hierarchy and in every
//! mounted v1 hierarchy (`/proc/PID/cgroup` matched with the mounts of
//! `/proc/self/mountinfo`), and the formats of their files: a single
//! number or `max`, flat keyed (`cpu.stat`), nested keyed per device
//! (`io.max`, `io.stat`), v1 per-device lines (`blkio.throttle.*`) and
//! pressure (PSI: `cpu.pressure`, `/proc/pressure/cpu`). Parsers take the
//! text, so captured trees (tests/data/cgroupfs/) test them.

use std::fs;
use std::path::{Path, PathBuf};

/// A mounted cgroup hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Where it is mounted.
    pub dir: PathBuf,
    /// The cgroup the mount shows as its top ("/" unless mounted from
    /// inside a cgroup namespace or a bind mount of a sub-tree).
    pub root: String,
    /// The unified (v2) hierarchy.
    pub v2: bool,
    /// A v1 hierarchy's controllers (`cpu`, `cpuacct`, `memory`, `blkio`,
    /// `pids`, `name=systemd`, ...); empty for v2.
    pub controllers: Vec<String>,
}

/// One cgroup of a process, with where its files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub v2: bool,
    /// A v1 hierarchy's controllers; empty for v2.
    pub controllers: Vec<String>,
    /// Its path in the hierarchy, as /proc/PID/cgroup gives it.
    pub path: String,
    /// Its directory, when its hierarchy is mounted here.
    pub dir: PathBuf,
}

impl Place {
    pub fn has(&self, controller: &str) -> bool {
        self.v2 || self.controllers.iter().any(|c| c == controller)
    }

    /// The cgroups from this one up to the top of what the mount shows,
    /// this one first (limits are inherited: a parent's quota binds too).
    pub fn ancestors(&self, mount_root: &Path) -> Vec<Place> {
        let mut out = vec![self.clone()];
        let (mut path, mut dir) = (self.path.clone(), self.dir.clone());
        while dir != mount_root && dir.pop() {
            path = match path.rfind('/') {
                Some(0) | None => "/".into(),
                Some(i) => path[..i].to_string(),
            };
            out.push(Place {
                path: path.clone(),
                dir: dir.clone(),
                ..self.clone()
            });
        }
        out
    }
}

/// v1 mount options that are not controllers.
const NOT_CONTROLLERS: [&str; 10] = [
    "rw",
    "ro",
    "nosuid",
    "nodev",
    "noexec",
    "xattr",
    "noprefix",
    "clone_children",
    "cpuset_v2_mode",
    "favordynmods",
];

/// The cgroup hierarchies mounted here, from /proc/self/mountinfo.
pub fn mounts() -> Vec<Mount> {
    fs::read_to_string("/proc/self/mountinfo")
        .map(|t| parse_mounts(&t))
        .unwrap_or_default()
}

/// cgroup and cgroup2 mounts in mountinfo ("ID PARENT MAJ:MIN ROOT POINT
/// OPTS ... - FSTYPE SOURCE SUPEROPTS"); the first mount of a hierarchy
/// wins.
pub fn parse_mounts(mountinfo: &str) -> Vec<Mount> {
    let mut out: Vec<Mount> = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mut l = left.split_whitespace().skip(3);
        let (Some(root), Some(point)) = (l.next(), l.next()) else {
            continue;
        };
        let mut r = right.split_whitespace();
        let (fstype, opts) = (r.next().unwrap_or(""), r.nth(1).unwrap_or(""));
        let mount = match fstype {
            "cgroup2" => Mount {
                dir: unescape(point),
                root: unescape_str(root),
                v2: true,
                controllers: vec![],
            },
            "cgroup" => Mount {
                dir: unescape(point),
                root: unescape_str(root),
                v2: false,
                controllers: opts
                    .split(',')
                    .filter(|o| !o.contains("relatime") && !o.starts_with("release_agent="))
                    .filter(|o| !NOT_CONTROLLERS.contains(o))
                    .map(str::to_string)
                    .collect(),
            },
            _ => continue,
        };
        let same = |m: &Mount| m.v2 == mount.v2 && m.controllers == mount.controllers;
        if !out.iter().any(same) {
            out.push(mount);
        }
    }
    out
}

/// A process's cgroups (the text of /proc/PID/cgroup: "ID:CONTROLLERS:PATH",
/// `0::PATH` for v2) placed in the mounted hierarchies; a hierarchy that is
/// not mounted here, or a cgroup outside what its mount shows, is left out.
pub fn places(proc_cgroup: &str, mounts: &[Mount]) -> Vec<Place> {
    proc_cgroup
        .lines()
        .filter_map(|line| {
            let mut f = line.splitn(3, ':');
            let (id, ctrls, path) = (f.next()?, f.next()?, f.next()?);
            let v2 = id == "0" && ctrls.is_empty();
            let controllers: Vec<String> = if v2 {
                vec![]
            } else {
                ctrls.split(',').map(str::to_string).collect()
            };
            let mount = mounts.iter().find(|m| {
                m.v2 == v2 && (v2 || controllers.iter().all(|c| m.controllers.contains(c)))
            })?;
            let rel = if mount.root == "/" {
                path
            } else {
                path.strip_prefix(mount.root.as_str())
                    .filter(|r| r.is_empty() || r.starts_with('/'))?
            };
            let rel = rel.trim_start_matches('/');
            Some(Place {
                v2,
                controllers,
                path: path.to_string(),
                dir: match rel {
                    "" => mount.dir.clone(),
                    rel => mount.dir.join(rel),
                },
            })
        })
        .collect()
}

/// The mount a place is in (the top its ancestors stop at).
pub fn mount_dir<'a>(place: &Place, mounts: &'a [Mount]) -> Option<&'a Path> {
    mounts
        .iter()
        .filter(|m| m.v2 == place.v2 && place.dir.starts_with(&m.dir))
        .max_by_key(|m| m.dir.as_os_str().len())
        .map(|m| m.dir.as_path())
}

/// A device ("MAJ:MIN") and its keys, `max` as None.
pub type DeviceKeys = (String, Vec<(String, Option<u64>)>);

/// A pressure file's stall totals in microseconds: some, and full.
pub type StallTotals = (u64, Option<u64>);

/// A cgroup file's text; None when absent or unreadable.
pub fn read(dir: &Path, file: &str) -> Option<String> {
    fs::read_to_string(dir.join(file)).ok()
}

/// A number, `max` (None), or v1's "no limit" (a page counter's maximum,
/// 2^63 rounded down to a page, or -1 for a CFS quota): None.
pub fn limit(text: &str) -> Option<u64> {
    let t = text.trim();
    if t == "max" || t == "-1" {
        return None;
    }
    t.parse::<u64>().ok().filter(|&n| n < 1 << 62)
}

/// The value of `key` in a flat keyed file ("key value" per line).
pub fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

/// Nested keyed lines per device ("8:0 rbps=max wbps=max riops=200
/// wiops=max" in io.max, "8:0 rbytes=.. wbytes=.. rios=.. wios=.." in
/// io.stat): the device and its keys, `max` as None.
pub fn per_device(text: &str) -> Vec<DeviceKeys> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let dev = w.next().filter(|d| d.contains(':'))?;
            let keys = w
                .filter_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    Some((k.to_string(), limit(v)))
                })
                .collect();
            Some((dev.to_string(), keys))
        })
        .collect()
}

/// v1 per-device lines: "MAJ:MIN N" (blkio.throttle.read_iops_device), or
/// "MAJ:MIN OP N" (blkio.throttle.io_serviced: OP Read, Write, ...), as
/// (device, op or "", value); "Total N" lines are left out.
pub fn v1_device_lines(text: &str) -> Vec<(String, String, u64)> {
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                [dev, n] if dev.contains(':') => {
                    Some((dev.to_string(), String::new(), n.parse().ok()?))
                }
                [dev, op, n] if dev.contains(':') => {
                    Some((dev.to_string(), op.to_string(), n.parse().ok()?))
                }
                _ => None,
            }
        })
        .collect()
}

/// Stall time totals of a pressure file (PSI: "some avg10=.. avg60=..
/// avg300=.. total=US" and "full ..."), in microseconds: (some, full);
/// `full` is None where the kernel gives none (cpu before 5.13, system-wide).
pub fn pressure(text: &str) -> Option<StallTotals> {
    let total = |kind: &str| {
        text.lines()
            .find(|l| l.starts_with(kind))?
            .split_whitespace()
            .find_map(|f| f.strip_prefix("total="))?
            .parse::<u64>()
            .ok()
    };
    Some((total("some ")?, total("full ")))
}

/// mountinfo escapes space, tab, newline and backslash as \ooo.
fn unescape_bytes(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .and_then(|o| std::str::from_utf8(o).ok())
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match (b[i], octal) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

fn unescape_str(s: &str) -> String {
    String::from_utf8_lossy(&unescape_bytes(s)).into_owned()
}

/// A mountinfo path field as a path (any bytes).
pub fn unescape(s: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(unescape_bytes(s)))
}

/// Where the cgroup hierarchies are mounted.
pub const ROOT: &str = "/sys/fs/cgroup";

/// A cgroup named by its path under ROOT or in full, resolved: None unless
/// it is a cgroup directory on ROOT once `..` and links are followed (so
/// that root never reads a cgroup.procs elsewhere for a user).
pub fn resolve(c: &Path) -> Option<PathBuf> {
    full_path(c)
        .canonicalize()
        .ok()
        .filter(|p| p.starts_with(ROOT) && p.join("cgroup.procs").is_file())
}

/// `c` under ROOT, unless it names a path there already.
pub fn full_path(c: &Path) -> PathBuf {
    if c.starts_with(ROOT) {
        c.to_path_buf()
    } else {
        Path::new(ROOT).join(c.strip_prefix("/").unwrap_or(c))
    }
}

/// The cgroup of systemd unit `name` (`NAME.service` when it has no unit
/// suffix), found by its name in the cgroup trees alone (no systemd API):
/// in the name=systemd hierarchy, else the unified one, else any v1 one.
pub fn find_unit(name: &str) -> Option<PathBuf> {
    const SUFFIXES: [&str; 4] = [".service", ".scope", ".slice", ".socket"];
    let unit = if SUFFIXES.iter().any(|s| name.ends_with(s)) {
        name.to_string()
    } else {
        format!("{name}.service")
    };
    // ROOT is the unified hierarchy itself (a v2-only machine).
    if Path::new(ROOT).join("cgroup.procs").is_file() {
        return find_dir(Path::new(ROOT), &unit, UNIT_DEPTH);
    }
    let mut trees: Vec<PathBuf> = fs::read_dir(ROOT)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    trees.sort_by_key(|p| match p.file_name().and_then(|n| n.to_str()) {
        Some("systemd") => (0, p.clone()),
        Some("unified") => (1, p.clone()),
        _ => (2, p.clone()),
    });
    trees.iter().find_map(|t| find_dir(t, &unit, UNIT_DEPTH))
}

/// How deep a unit's cgroup may be (user@1000.service/app.slice/x.scope is 5).
const UNIT_DEPTH: usize = 6;

/// A directory named `name` under `dir`, breadth first, `depth` levels down
/// at most.
fn find_dir(dir: &Path, name: &str, depth: usize) -> Option<PathBuf> {
    let mut level = vec![dir.to_path_buf()];
    for _ in 0..depth {
        let mut next = Vec::new();
        for d in &level {
            for e in fs::read_dir(d).into_iter().flatten().flatten() {
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                if e.file_name().to_str() == Some(name) {
                    return Some(e.path());
                }
                next.push(e.path());
            }
        }
        level = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
90 88 0:38 /docker/abc /mnt/in\\040ns rw - cgroup2 cgroup2 rw";

    #[test]
    fn every_hierarchy_is_found_with_its_controllers() {
        let m = parse_mounts(MOUNTINFO);
        assert_eq!(m.len(), 5, "{m:?}");
        assert_eq!(m[0].controllers, ["cpu"]);
        assert_eq!(m[3].controllers, ["name=systemd"]);
        assert!(m[4].v2 && m[4].dir == Path::new("/sys/fs/cgroup/unified"));
    }

    #[test]
    fn a_process_cgroups_are_placed_in_their_mounts() {
        let m = parse_mounts(MOUNTINFO);
        let p = places(
            "9:name=systemd:/\n4:memory:/box/a\n1:cpu:/box\n7:blkio:/\n0::/user.slice/x.scope\n3:cpuset:/\n",
            &m,
        );
        let dirs: Vec<_> = p.iter().map(|p| p.dir.to_str().unwrap()).collect();
        assert_eq!(
            dirs,
            [
                "/sys/fs/cgroup/systemd",
                "/sys/fs/cgroup/memory/box/a",
                "/sys/fs/cgroup/cpu/box",
                "/sys/fs/cgroup/blkio",
                "/sys/fs/cgroup/unified/user.slice/x.scope",
            ]
        );
        assert!(p[1].has("memory") && !p[1].has("cpu") && p[4].has("io"));
        let up = p[1].ancestors(mount_dir(&p[1], &m).unwrap());
        let paths: Vec<_> = up.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["/box/a", "/box", "/"]);
        assert_eq!(up[2].dir, Path::new("/sys/fs/cgroup/memory"));
    }

    #[test]
    fn a_namespaced_mount_shows_its_subtree_only() {
        let m = vec![Mount {
            dir: "/sys/fs/cgroup".into(),
            root: "/docker/abc".into(),
            v2: true,
            controllers: vec![],
        }];
        let p = places("0::/docker/abc/inner\n", &m);
        assert_eq!(p[0].dir, Path::new("/sys/fs/cgroup/inner"));
        assert!(places("0::/elsewhere\n", &m).is_empty());
    }

    #[test]
    fn the_file_formats() {
        assert_eq!(limit("max\n"), None);
        assert_eq!(limit("-1\n"), None);
        assert_eq!(limit("9223372036854771712\n"), None);
        assert_eq!(limit("50331648\n"), Some(50331648));
        let stat = "nr_periods 167\nnr_throttled 166\nthrottled_time 2650000000\n";
        assert_eq!(keyed(stat, "nr_throttled"), Some(166));
        assert_eq!(keyed(stat, "nr_periods"), Some(167));
        assert_eq!(keyed(stat, "nr"), None);
        let max = per_device("254:0 rbps=max wbps=max riops=200 wiops=max\n");
        assert_eq!(max[0].0, "254:0");
        assert_eq!(max[0].1[2], ("riops".to_string(), Some(200)));
        assert_eq!(max[0].1[0], ("rbps".to_string(), None));
        assert_eq!(
            v1_device_lines("254:0 Read 1434\n254:0 Write 9\nTotal 1443\n"),
            [
                ("254:0".to_string(), "Read".to_string(), 1434),
                ("254:0".to_string(), "Write".to_string(), 9)
            ]
        );
        assert_eq!(v1_device_lines("8:0 200\n")[0].2, 200);
        let psi = "some avg10=1.00 avg60=0.50 avg300=0.10 total=1234\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=56\n";
        assert_eq!(pressure(psi), Some((1234, Some(56))));
        assert_eq!(
            pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=9\n"),
            Some((9, None))
        );
    }
}
