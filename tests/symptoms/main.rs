//! The symptom each lab teaches is real and measurable, twice: by a tool
//! other than kdiag (/proc, ps, perf, strace) and by kdiag's own
//! instrument (ps, top, time, iosnoop, diagnose). Each test runs its
//! workload for a few seconds with a seed token, takes what to expect from
//! the library's truth for that token, and compares the workload's two
//! modes with each other where the lesson is a comparison: no timed
//! assertion on kdiag itself.
//!
//! The tests run one at a time (they measure CPU and disk), as root;
//! under CI=true a test that needs root fails instead of skipping.

#[path = "../common/mod.rs"]
mod common;
use common::*;

mod bio;
mod others;

use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

pub(crate) static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

pub(crate) fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `expect` part of the library's truth.
pub(crate) fn truth(name: &str, seed: &str, args: &[&str]) -> Value {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let text = kdiag_workloads::describe(name, seed, &args).unwrap();
    serde_json::from_str::<Value>(&text).unwrap()["expect"].clone()
}

pub(crate) fn disk_tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("kdiag-symptom")
        .tempdir_in("/var/tmp")
        .expect("tempdir in /var/tmp")
}

pub(crate) fn spawn(name: &str, args: &[&str]) -> Child {
    Command::new(workload(name))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("workload starts")
}

pub(crate) fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        sleep(Duration::from_millis(20));
    }
}

pub(crate) fn stat_fields(path: &str) -> Option<(String, Vec<String>)> {
    let stat = std::fs::read_to_string(path).ok()?;
    let comm = stat[stat.find('(')? + 1..stat.rfind(')')?].to_string();
    let rest = stat[stat.rfind(')')? + 2..]
        .split_whitespace()
        .map(str::to_string)
        .collect();
    Some((comm, rest))
}

/// (tid, comm, state) of every thread of `pid`.
pub(crate) fn threads(pid: u32) -> Vec<(u32, String, char)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let tid: u32 = e.file_name().to_str()?.parse().ok()?;
            let (comm, f) = stat_fields(e.path().join("stat").to_str()?)?;
            Some((tid, comm, f[0].chars().next()?))
        })
        .collect()
}

/// utime + stime of the whole process, in seconds.
pub(crate) fn cpu_secs(pid: u32) -> f64 {
    let (_, f) = stat_fields(&format!("/proc/{pid}/stat")).unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()) as f64 / hz
}

pub(crate) fn proc_io(pid: u32, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}: ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

pub(crate) fn procs_blocked() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    stat.lines()
        .find_map(|l| l.strip_prefix("procs_blocked "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

pub(crate) fn load1() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap();
    text.split_whitespace().next().unwrap().to_string()
}

/// The child of `ppid` named `comm`.
/// A process named `comm` below `ancestor` (kdiag runs commands under a
/// supervisor of its own, so the workload is a grandchild).
pub(crate) fn descendant_of(ancestor: u32, comm: &str) -> Option<u32> {
    let parent =
        |pid: u32| -> Option<u32> { stat_fields(&format!("/proc/{pid}/stat"))?.1[1].parse().ok() };
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let (c, _) = stat_fields(&format!("/proc/{pid}/stat"))?;
        if c != comm {
            return None;
        }
        let mut p = pid;
        for _ in 0..4 {
            p = parent(p)?;
            if p == ancestor {
                return Some(pid);
            }
        }
        None
    })
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Slope of a least-squares line through (x, y).
pub(crate) fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let num: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let den: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    num / den
}

/// `kdiag diagnose --json -d SECS -p PID`.
pub(crate) fn diagnose(pid: u32, secs: &str) -> Value {
    let out = run_kdiag(&["diagnose", "--json", "-d", secs, "-p", &pid.to_string()]);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("diagnose JSON ({e}): {}", stderr(&out)))
}

/// `kdiag time --json -- CMD`: the rusage of the command.
pub(crate) fn kdiag_time(cmd: &[&str]) -> Value {
    let mut args = vec!["time", "--json", "--"];
    args.extend(cmd);
    let out = run_kdiag(&args);
    assert!(out.status.success(), "kdiag time {cmd:?}: {}", stderr(&out));
    // The report goes to stderr, after the command's own output.
    let err = stderr(&out);
    let json = &err[err.find("{\n").expect("JSON report")..];
    serde_json::from_str::<Value>(json).unwrap()["rusage"].clone()
}

/// One counter of `perf stat -x, -e EVENT -- CMD`.
pub(crate) fn perf_stat(event: &str, cmd: &[&str]) -> f64 {
    let out = Command::new("perf")
        .args(["stat", "-x,", "-e", event, "--"])
        .args(cmd)
        .stdout(Stdio::null())
        .output()
        .expect("perf is installed");
    assert!(out.status.success(), "perf stat {cmd:?}: {}", stderr(&out));
    let err = stderr(&out);
    let line = err
        .lines()
        .find(|l| l.contains(event))
        .unwrap_or_else(|| panic!("{event} in {err}"));
    line.split(',').next().unwrap().parse().unwrap()
}
