//! Pressure stall information (/proc/pressure/{cpu,io,memory}) and which
//! cgroup a process is in (/proc/PID/cgroup): what `kdiag watch` reads
//! beside the per-process files.

use std::path::Path;

use crate::model::watch::Pressure;

const RESOURCES: [&str; 3] = ["cpu", "io", "memory"];

/// The machine's pressure, cumulative; empty without PSI.
pub fn read() -> Vec<Pressure> {
    RESOURCES
        .iter()
        .filter_map(|r| {
            let text = std::fs::read_to_string(format!("/proc/pressure/{r}")).ok()?;
            parse(r, &text)
        })
        .collect()
}

/// One pressure file as seconds of stall: "some" (some tasks waiting) and,
/// when the kernel keeps it, "full" (all of them), parsed by the one PSI
/// reader, `sys::cgroupfs::pressure`.
pub fn parse(resource: &str, text: &str) -> Option<Pressure> {
    let (some_us, full_us) = crate::sys::cgroupfs::pressure(text)?;
    Some(Pressure {
        resource: resource.to_string(),
        waiting_s: some_us as f64 / 1e6,
        stalled_s: full_us.map(|us| us as f64 / 1e6),
    })
}

/// The cgroup a process is in, from its /proc/PID/cgroup text: the v2 path
/// when it is not the root, else the path of the v1 hierarchy with the cpu
/// controller (systems with both keep processes in v1's), else "/".
pub fn cgroup_of(text: &str) -> String {
    let mut v1 = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if controllers.is_empty() && path != "/" {
            return path.to_string();
        }
        if controllers.split(',').any(|c| c == "cpu") {
            v1 = Some(path.to_string());
        }
    }
    v1.unwrap_or_else(|| "/".to_string())
}

/// The processes in cgroup directory `dir` and every cgroup below it.
pub fn cgroup_pids(dir: &Path) -> std::io::Result<Vec<i32>> {
    let mut pids = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let text = std::fs::read_to_string(d.join("cgroup.procs"))?;
        pids.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        for e in std::fs::read_dir(&d)?.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    pids.sort_unstable();
    pids.dedup();
    Ok(pids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_some_and_full() {
        let t = "some avg10=0.00 avg60=0.00 avg300=0.00 total=1500000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=250\n";
        let p = parse("io", t).unwrap();
        assert_eq!(p.waiting_s, 1.5);
        assert_eq!(p.stalled_s, Some(0.00025));
        let cpu = parse("cpu", "some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n").unwrap();
        assert_eq!(cpu.stalled_s, None);
        assert!(parse("cpu", "").is_none());
    }

    #[test]
    fn cgroup_prefers_v2_then_v1_cpu() {
        assert_eq!(cgroup_of("12:cpu,cpuacct:/a/b\n0::/\n"), "/a/b");
        assert_eq!(
            cgroup_of("12:cpu,cpuacct:/a\n0::/system.slice/x.service\n"),
            "/system.slice/x.service"
        );
        assert_eq!(cgroup_of("3:memory:/m\n"), "/");
    }
}
