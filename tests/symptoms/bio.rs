//! Lab 4-bio: D state with an idle CPU under kdiag's throttle.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;
use crate::*;

// ---------------------------------------------------------------- bio

/// Lab 4-bio: with the throttle kdiag applies, most readers are in D most
/// of the time while the process uses almost no CPU: an I/O problem.
#[test]
fn bio_readers_wait_in_d_state_while_the_cpu_stays_idle() {
    let _one = serial();
    if !require_root("bio_readers_wait_in_d_state_while_the_cpu_stays_idle") {
        return;
    }
    let seed = "symptom-bio";
    let expect = truth("bio", seed, &[]);
    let n = expect["threads"].as_u64().unwrap() as usize;
    let prefix = expect["thread_name_prefix"].as_str().unwrap().to_string();
    let iops = expect["throttle_read_iops"].as_f64().unwrap();
    let blocked_before = median((0..5).map(|_| procs_blocked()).collect());
    let load_before = load1();

    let tmp = disk_tempdir();
    let dir = tmp.path().join("bio");
    let (mut kd, pid) = start_bio(kdiag(), &["--seed", seed, "--duration", "30"], &dir);
    let kpid = kd.0[0].id();
    let readers = || {
        threads(pid)
            .into_iter()
            .filter(|t| t.1.starts_with(&prefix))
            .collect::<Vec<_>>()
    };
    wait_for("the readers", Duration::from_secs(10), || {
        readers().len() == n
    });
    // It sits in kdiag's throttling cgroup, whose limit is the truth's.
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let cg_name = format!("kdiag-{kpid}-");
    assert!(cgroups.contains(&cg_name), "{cgroups}");
    sleep(Duration::from_millis(500));

    // /proc: thread states and CPU over 3 s.
    let (c0, t0) = (cpu_secs(pid), Instant::now());
    let (mut seen, mut in_d, mut blocked) = (0, 0, vec![]);
    while t0.elapsed() < Duration::from_secs(3) {
        let ts = readers();
        seen += ts.len();
        in_d += ts.iter().filter(|t| t.2 == 'D').count();
        blocked.push(procs_blocked());
        sleep(Duration::from_millis(40));
    }
    let cpu = (cpu_secs(pid) - c0) / t0.elapsed().as_secs_f64();
    let d_share = in_d as f64 / seen as f64;
    let blocked = median(blocked);

    // ps: one line per thread, a few snapshots.
    let mut ps_d = vec![];
    for _ in 0..5 {
        let out = Command::new("ps")
            .args(["-L", "-o", "stat=,comm=", "-p", &pid.to_string()])
            .output()
            .unwrap();
        let lines: Vec<String> = stdout(&out)
            .lines()
            .filter(|l| {
                l.split_whitespace()
                    .nth(1)
                    .is_some_and(|c| c.starts_with(&prefix))
            })
            .map(str::to_string)
            .collect();
        let d = lines.iter().filter(|l| l.starts_with('D')).count();
        ps_d.push(d as f64 / n as f64);
        sleep(Duration::from_millis(100));
    }
    let ps_d = median(ps_d);

    // kdiag ps -T and kdiag top --once: the same from kdiag's instruments.
    let mut kps_d = vec![];
    for _ in 0..5 {
        let out = run_kdiag(&["ps", "-T", "--json", "-p", &pid.to_string()]);
        let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
        let rows: Vec<&Value> = rows
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["comm"].as_str().unwrap().starts_with(&prefix))
            .collect();
        let d = rows
            .iter()
            .filter(|r| r["stat"].as_str().unwrap().starts_with('D'))
            .count();
        kps_d.push(d as f64 / n as f64);
    }
    let kps_d = median(kps_d);
    let out = run_kdiag(&[
        "top",
        "--once",
        "--json",
        "--interval",
        "1",
        "-p",
        &pid.to_string(),
    ]);
    let top: Value = serde_json::from_slice(&out.stdout).unwrap();
    let top_cpu = top["processes"][0]["cpu_percent"].as_f64().unwrap();

    // kdiag iosnoop: tiny synchronous reads at about the throttle's rate.
    // The throttle holds each read back and a kworker (blk-throttle's
    // dispatch work) submits it later, so the rows are charged to that
    // kworker, not to the readers: count every 512-byte read of the disk.
    let out = run_kdiag(&["iosnoop", "--json", "2"]);
    let trace: Value = serde_json::from_slice(&out.stdout).unwrap();
    let io_bytes = expect["io_bytes"].as_u64().unwrap();
    let reads: Vec<&Value> = trace["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["rwbs"].as_str().unwrap().starts_with('R') && r["bytes"] == io_bytes)
        .collect();
    let rate = reads.len() as f64 / trace["duration_s"].as_f64().unwrap();
    let by_kworker = reads
        .iter()
        .filter(|r| r["comm"].as_str().unwrap().starts_with("kworker"))
        .count();

    eprintln!(
        "bio ({n} readers, limit {iops}/s): /proc D {:.0}%, ps D {:.0}%, kdiag ps D {:.0}%; \
         CPU {:.1}% of one CPU (kdiag top {top_cpu:.1}%); procs_blocked {blocked_before} -> {blocked}; \
         load1 {load_before} -> {}; iosnoop {rate:.0} reads/s of {io_bytes} bytes, \
         {by_kworker} of {} charged to kworkers",
        d_share * 100.0,
        ps_d * 100.0,
        kps_d * 100.0,
        cpu * 100.0,
        load1(),
        reads.len()
    );
    assert!(d_share >= 0.8, "readers in D only {d_share:.2} of samples");
    assert!(ps_d >= 0.8, "ps: readers in D {ps_d:.2}");
    assert!(kps_d >= 0.8, "kdiag ps: readers in D {kps_d:.2}");
    assert!(cpu < 0.10, "bio used {:.1}% of a CPU", cpu * 100.0);
    assert!(top_cpu < 10.0, "kdiag top: {top_cpu}%");
    // The load average is a slow average of runnable + D tasks machine-wide
    // (shared machine): its input, the blocked count, is what is checked.
    assert!(
        blocked >= blocked_before + n as f64 * 0.7,
        "procs_blocked {blocked_before} -> {blocked}"
    );
    assert!(
        rate <= iops * 1.2 && rate >= iops * 0.3,
        "{rate:.0} reads/s under a {iops}/s limit"
    );

    // SIGTERM to kdiag reaches the workload; nothing is left behind.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(kpid as i32, libc::SIGTERM) };
    let status = kd.0[0].wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    assert!(!Path::new(&format!("/proc/{pid}")).exists(), "bio ended");
    assert!(!dir.exists(), "scratch removed");
    let hierarchies = ["/sys/fs/cgroup/blkio", "/sys/fs/cgroup"];
    for h in hierarchies {
        let left: Vec<PathBuf> = std::fs::read_dir(h)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        assert!(
            !left.iter().any(|p| p.to_string_lossy().contains(&cg_name)),
            "cgroup left in {h}: {left:?}"
        );
    }
}

/// SIGKILL cannot be caught: the workload still gets SIGTERM (parent-death
/// signal) and removes its scratch directory, and the cgroup kdiag left is
/// removed by the next kdiag that makes one.
#[test]
fn bio_leaves_nothing_when_kdiag_is_killed() {
    let _one = serial();
    if !require_root("bio_leaves_nothing_when_kdiag_is_killed") {
        return;
    }
    let tmp = disk_tempdir();
    let dir = tmp.path().join("bio");
    let (mut kd, pid) = start_bio(kdiag(), &["--sectors", "100", "--duration", "30"], &dir);
    let cgroup_dir = kdiag_cgroup_of(pid);
    kd.0[0].kill().unwrap();
    kd.0[0].wait().unwrap();
    let gone = |p: u32| {
        stat_fields(&format!("/proc/{p}/stat")).is_none_or(|(_, f)| f[0] == "Z" || f[0] == "X")
    };
    wait_for(
        "bio to end after kdiag died",
        Duration::from_secs(10),
        || gone(pid),
    );
    wait_for(
        "its scratch directory to go",
        Duration::from_secs(5),
        || !dir.exists(),
    );
    assert!(cgroup_dir.exists(), "SIGKILL left {}", cgroup_dir.display());
    // The next kdiag sweeps it.
    let status = short_bio(&dir);
    assert!(status.success(), "{status:?}");
    assert!(!cgroup_dir.exists(), "{} swept", cgroup_dir.display());
}

/// `CMD workload run bio ARGS --scratch DIR`, CMD a kdiag: it and the pid
/// of its bio, once bio runs and has made its scratch directory.
fn start_bio(mut cmd: Command, args: &[&str], dir: &Path) -> (Kids, u32) {
    let child = cmd
        .args(["workload", "run", "bio"])
        .args(args)
        .arg("--scratch")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let kpid = child.id();
    let kids = Kids(vec![child]);
    let mut pid = 0;
    wait_for("the bio process", Duration::from_secs(10), || {
        pid = descendant_of(kpid, "bio").unwrap_or(0);
        pid != 0 && dir.exists()
    });
    (kids, pid)
}

/// A half-second bio run to its end (another kdiag making a cgroup).
fn short_bio(dir: &Path) -> std::process::ExitStatus {
    kdiag()
        .args(["workload", "run", "bio", "--sectors", "100"])
        .args(["--duration", "0.5", "--scratch"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
}

/// The directory of the kdiag cgroup process `pid` is in.
fn kdiag_cgroup_of(pid: u32) -> PathBuf {
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap()
        .lines()
        .find_map(|l| {
            let path = l.rsplit(':').next()?;
            path.contains("kdiag-").then(|| path.to_string())
        })
        .unwrap();
    ["/sys/fs/cgroup/blkio", "/sys/fs/cgroup"]
        .iter()
        .map(|h| PathBuf::from(format!("{h}{cgroup}")))
        .find(|p| p.exists())
        .unwrap()
}

/// A live kdiag is never taken for dead, whatever its binary is called: a
/// copy named `kdiag.real` (as a package may install it) runs bio, another
/// kdiag starts and sweeps stale cgroups, and bio keeps running in its
/// cgroup. (kdiag once judged an owner by its name and SIGKILLed this bio.)
#[test]
fn a_renamed_kdiag_keeps_its_workload_when_another_starts() {
    let _one = serial();
    if !require_root("a_renamed_kdiag_keeps_its_workload_when_another_starts") {
        return;
    }
    // The copy finds its workloads next to itself: bio is linked there.
    let bin = tempfile::Builder::new()
        .prefix("renamed-kdiag")
        .tempdir_in(bin_dir())
        .unwrap();
    let real = bin.path().join("kdiag.real");
    std::fs::copy(env!("CARGO_BIN_EXE_kdiag"), &real).unwrap();
    std::os::unix::fs::symlink(workload("bio"), bin.path().join("bio")).unwrap();
    let tmp = disk_tempdir();
    let (dir, other) = (tmp.path().join("bio"), tmp.path().join("other"));
    let args = ["--sectors", "100", "--duration", "30"];
    let (mut kd, pid) = start_bio(Command::new(&real), &args, &dir);
    let kpid = kd.0[0].id();
    let cgroup_dir = kdiag_cgroup_of(pid);
    let status = short_bio(&other);
    assert!(status.success(), "{status:?}");
    let state = stat_fields(&format!("/proc/{pid}/stat")).map(|(_, f)| f[0].clone());
    assert!(
        state.as_deref().is_some_and(|s| s != "Z" && s != "X"),
        "the renamed kdiag's bio was killed (state {state:?})"
    );
    assert!(cgroup_dir.exists(), "{} kept", cgroup_dir.display());
    assert!(
        kd.0[0].try_wait().unwrap().is_none(),
        "kdiag.real still runs"
    );
    // Stopped the ordinary way, it cleans up after itself.
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(kpid as i32, libc::SIGTERM) };
    kd.0[0].wait().unwrap();
    assert!(!cgroup_dir.exists(), "{} removed", cgroup_dir.display());
}

/// Without root there is no throttle: kdiag says what is missing (exit 3)
/// instead of running an unfaithful bio; --no-throttle runs it anyway.
#[test]
fn bio_without_root_says_what_is_missing() {
    let _one = serial();
    let mut cmd = kdiag();
    cmd.args(["workload", "run", "bio", "--duration", "1"]);
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // std drops root's supplementary groups along with the uid.
        use std::os::unix::process::CommandExt;
        cmd.env_remove("SUDO_UID").uid(65534).gid(65534);
    }
    let out = cmd.output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("needs root") && err.contains("sudo") && err.contains("--no-throttle"),
        "{err}"
    );
    let out = run_kdiag(&["workload", "describe", "bio", "--no-throttle"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["expect"]["throttle_read_iops"], Value::Null);
}
