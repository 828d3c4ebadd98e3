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

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `expect` part of the library's truth.
fn truth(name: &str, seed: &str, args: &[&str]) -> Value {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let text = kdiag_workloads::describe(name, seed, &args).unwrap();
    serde_json::from_str::<Value>(&text).unwrap()["expect"].clone()
}

fn disk_tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("kdiag-symptom")
        .tempdir_in("/var/tmp")
        .expect("tempdir in /var/tmp")
}

fn spawn(name: &str, args: &[&str]) -> Child {
    Command::new(workload(name))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("workload starts")
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        sleep(Duration::from_millis(20));
    }
}

fn stat_fields(path: &str) -> Option<(String, Vec<String>)> {
    let stat = std::fs::read_to_string(path).ok()?;
    let comm = stat[stat.find('(')? + 1..stat.rfind(')')?].to_string();
    let rest = stat[stat.rfind(')')? + 2..]
        .split_whitespace()
        .map(str::to_string)
        .collect();
    Some((comm, rest))
}

/// (tid, comm, state) of every thread of `pid`.
fn threads(pid: u32) -> Vec<(u32, String, char)> {
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
fn cpu_secs(pid: u32) -> f64 {
    let (_, f) = stat_fields(&format!("/proc/{pid}/stat")).unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()) as f64 / hz
}

fn proc_io(pid: u32, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}: ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

fn procs_blocked() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    stat.lines()
        .find_map(|l| l.strip_prefix("procs_blocked "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

fn load1() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap();
    text.split_whitespace().next().unwrap().to_string()
}

/// The child of `ppid` named `comm`.
fn child_of(ppid: u32, comm: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let (c, f) = stat_fields(&format!("/proc/{pid}/stat"))?;
        (c == comm && f[1] == ppid.to_string()).then_some(pid)
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Slope of a least-squares line through (x, y).
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let num: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let den: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    num / den
}

/// `kdiag diagnose --json -d SECS -p PID`.
fn diagnose(pid: u32, secs: &str) -> Value {
    let out = run_kdiag(&["diagnose", "--json", "-d", secs, "-p", &pid.to_string()]);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("diagnose JSON ({e}): {}", stderr(&out)))
}

/// `kdiag time --json -- CMD`: the rusage of the command.
fn kdiag_time(cmd: &[&str]) -> Value {
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
fn perf_stat(event: &str, cmd: &[&str]) -> f64 {
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
    let mut kd = Kids(vec![
        kdiag()
            .args(["workload", "run", "bio", "--seed", seed, "--duration", "30"])
            .arg("--scratch")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ]);
    let kpid = kd.0[0].id();
    let mut pid = 0;
    wait_for("the bio process", Duration::from_secs(10), || {
        pid = child_of(kpid, "bio").unwrap_or(0);
        pid != 0
    });
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
    let out = run_kdiag(&["top", "--once", "--json", "-d", "1", "-p", &pid.to_string()]);
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
    let run = |duration: &str| {
        kdiag()
            .args([
                "workload",
                "run",
                "bio",
                "--sectors",
                "100",
                "--duration",
                duration,
            ])
            .arg("--scratch")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut kd = Kids(vec![run("30")]);
    let kpid = kd.0[0].id();
    let mut pid = 0;
    wait_for("the bio process", Duration::from_secs(10), || {
        pid = child_of(kpid, "bio").unwrap_or(0);
        pid != 0 && dir.exists()
    });
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap()
        .lines()
        .find_map(|l| {
            let path = l.rsplit(':').next()?;
            path.contains("kdiag-").then(|| path.to_string())
        })
        .unwrap();
    let cgroup_dir = ["/sys/fs/cgroup/blkio", "/sys/fs/cgroup"]
        .iter()
        .map(|h| PathBuf::from(format!("{h}{cgroup}")))
        .find(|p| p.exists())
        .unwrap();
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
    let status = run("0.5").wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!cgroup_dir.exists(), "{} swept", cgroup_dir.display());
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

// ---------------------------------------------------------------- io-stall

/// The io-stall lesson: the culprit only dirties page cache; the block
/// writes are issued by the kernel's writeback threads, so top blames no
/// one. perf (on-CPU task at issue) and kdiag iosnoop (submitter) both show
/// kworker/jbd2 writing what io-stall dirtied.
#[test]
fn io_stall_writes_are_done_by_kernel_threads() {
    let _one = serial();
    if !require_root("io_stall_writes_are_done_by_kernel_threads") {
        return;
    }
    let tmp = disk_tempdir();
    let dir = tmp.path().join("io-stall");
    let args = [
        "--seed",
        "symptom-stall",
        "--burst",
        "32M",
        "--period",
        "1s",
        "--duration",
        "10",
        "--scratch",
        dir.to_str().unwrap(),
    ];
    let expect = truth("io-stall", "symptom-stall", &["--burst", "32M"]);
    let mut kids = Kids(vec![spawn("io-stall", &args)]);
    let pid = kids.0[0].id();
    wait_for("a first burst", Duration::from_secs(10), || {
        proc_io(pid, "write_bytes") >= 32 << 20
    });
    let data = tmp.path().join("perf.data");
    let perf = Command::new("perf")
        .args(["record", "-q", "-e", "block:block_rq_issue", "-a", "-o"])
        .arg(&data)
        .args(["--", "sleep", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("perf is installed");
    kids.0.push(perf);
    let (w0, c0, t0) = (proc_io(pid, "write_bytes"), cpu_secs(pid), Instant::now());
    let out = run_kdiag(&["iosnoop", "--json", "3"]);
    let status = kids.0.pop().unwrap().wait().unwrap();
    assert!(status.success(), "perf record");
    let (w1, c1) = (proc_io(pid, "write_bytes"), cpu_secs(pid));
    let dirtied = (w1 - w0) as f64;
    let cpu = (c1 - c0) / t0.elapsed().as_secs_f64();

    // perf script: the task on the CPU when each write was issued.
    let script = Command::new("perf")
        .args(["script", "-F", "comm,trace", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    let (mut perf_kernel, mut perf_culprit) = (0.0, 0.0);
    for line in stdout(&script).lines() {
        // "kworker/u8:1   254,0 W 1048576 () ..." : comm, dev, rwbs, bytes
        let (comm, trace) = match line.trim_start().split_once(char::is_whitespace) {
            Some(x) => x,
            None => continue,
        };
        let f: Vec<&str> = trace.split_whitespace().collect();
        if f.len() < 3 || !f[1].contains('W') {
            continue;
        }
        let bytes: f64 = f[2].parse().unwrap_or(0.0);
        if comm.starts_with("kworker") || comm.starts_with("jbd2") {
            perf_kernel += bytes;
        } else if comm == "io-stall" {
            perf_culprit += bytes;
        }
    }
    // kdiag iosnoop: charged to the submitter, which for writeback is the
    // flusher kworker.
    let trace: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (mut kd_kernel, mut kd_culprit) = (0.0, 0.0);
    for r in trace["requests"].as_array().unwrap() {
        if !r["rwbs"].as_str().unwrap().contains('W') {
            continue;
        }
        let comm = r["comm"].as_str().unwrap();
        let bytes = r["bytes"].as_f64().unwrap();
        if comm.starts_with("kworker") || comm.starts_with("jbd2") {
            kd_kernel += bytes;
        } else if r["pid"].as_u64() == Some(pid as u64) {
            kd_culprit += bytes;
        }
    }
    let mib = |b: f64| b / (1 << 20) as f64;
    eprintln!(
        "io-stall: dirtied {:.0} MiB in 3 s for {:.1}% of a CPU; writes issued by kernel threads: \
         perf {:.0} MiB, kdiag iosnoop {:.0} MiB; by io-stall itself: perf {:.1} MiB, iosnoop {:.1} MiB",
        mib(dirtied),
        cpu * 100.0,
        mib(perf_kernel),
        mib(kd_kernel),
        mib(perf_culprit),
        mib(kd_culprit)
    );
    assert!(
        dirtied >= 2.0 * expect["burst_bytes"].as_f64().unwrap(),
        "bursts"
    );
    assert!(cpu < 0.25, "the culprit stays cheap: {cpu:.3} CPUs");
    for (tool, kernel, culprit) in [
        ("perf", perf_kernel, perf_culprit),
        ("kdiag iosnoop", kd_kernel, kd_culprit),
    ] {
        assert!(
            kernel >= 0.5 * dirtied,
            "{tool}: kernel threads wrote {} of {} MiB dirtied",
            mib(kernel),
            mib(dirtied)
        );
        assert!(
            culprit <= 0.25 * dirtied,
            "{tool}: io-stall issued {} MiB itself",
            mib(culprit)
        );
    }
}

// ---------------------------------------------------------------- scheduling

/// Lab 2-scheduling: fork mode takes many times the page faults of thread
/// mode, by perf stat and by kdiag time.
#[test]
fn scheduling_fork_takes_many_more_page_faults_than_threads() {
    let _one = serial();
    if !require_root("scheduling_fork_takes_many_more_page_faults_than_threads") {
        return;
    }
    let seed = "symptom-sched";
    let bin = workload("scheduling");
    let bin = bin.to_str().unwrap();
    let tasks = truth("scheduling", seed, &["1"])["tasks"].as_u64().unwrap();
    let perf = |mode: &str| perf_stat("page-faults", &[bin, mode, "--seed", seed]);
    let kd = |mode: &str| {
        kdiag_time(&[bin, mode, "--seed", seed])["minor_faults"]
            .as_f64()
            .unwrap()
    };
    let (pt, pf) = (perf("0"), perf("1"));
    let (kt, kf) = (kd("0"), kd("1"));
    eprintln!(
        "scheduling ({tasks} tasks): page faults threads/fork: perf {pt}/{pf} ({:.1}x), \
         kdiag time {kt}/{kf} ({:.1}x)",
        pf / pt,
        kf / kt
    );
    assert!(pf >= 4.0 * pt, "perf: fork {pf} vs threads {pt}");
    assert!(kf >= 4.0 * kt, "kdiag time: fork {kf} vs threads {kt}");
    // Both count the same faults (the children's included) to within a third.
    assert!((kf / pf - 1.0).abs() < 0.35, "perf {pf} vs kdiag {kf}");
}

// ---------------------------------------------------------------- memory

/// Lab 3-memory: at 1 KiB blocks mmap is cheaper than read/write (two
/// system calls per KiB); at 64 KiB read/write wins; mmap barely depends on
/// the block size. CPU time by perf stat and by kdiag time (medians of 3,
/// interleaved); the system calls counted by strace.
#[test]
fn memory_speed_order_at_1k_and_64k() {
    let _one = serial();
    if !require_root("memory_speed_order_at_1k_and_64k") {
        return;
    }
    let tmp = disk_tempdir();
    // One source for every run (its creation would dominate the CPU time).
    let src = tmp.path().join("src.bin");
    let mut rng = kdiag_workloads::Rng::new(1, "symptom-memory");
    let bytes: Vec<u8> = (0..(32 << 20) / 8)
        .flat_map(|_| rng.next_u64().to_le_bytes())
        .collect();
    std::fs::write(&src, &bytes).unwrap();
    let scratch = tmp.path().join("scratch");
    let bin = workload("memory");
    let cmd = |mode: &'static str, blk: &'static str| -> Vec<String> {
        vec![
            bin.to_str().unwrap().into(),
            mode.into(),
            blk.into(),
            src.to_str().unwrap().into(),
            "--scratch".into(),
            scratch.to_str().unwrap().into(),
        ]
    };
    let configs = [("0", "1K"), ("1", "1K"), ("0", "64K"), ("1", "64K")];
    let (mut perf, mut kd) = (vec![vec![]; 4], vec![vec![]; 4]);
    for _ in 0..3 {
        for (i, (mode, blk)) in configs.iter().enumerate() {
            let c = cmd(mode, blk);
            let c: Vec<&str> = c.iter().map(String::as_str).collect();
            perf[i].push(perf_stat("task-clock", &c) / 1000.0);
            let ru = kdiag_time(&c);
            kd[i].push(ru["user_secs"].as_f64().unwrap() + ru["sys_secs"].as_f64().unwrap());
        }
    }
    let perf: Vec<f64> = perf.into_iter().map(median).collect();
    let kd: Vec<f64> = kd.into_iter().map(median).collect();
    eprintln!(
        "memory 32 MiB, CPU s (mmap 1K, rw 1K, mmap 64K, rw 64K): perf {perf:.3?}, kdiag time {kd:.3?}"
    );
    for (tool, t) in [("perf", &perf), ("kdiag time", &kd)] {
        let (mmap1, rw1, mmap64, rw64) = (t[0], t[1], t[2], t[3]);
        assert!(rw1 > 1.2 * mmap1, "{tool}: at 1K mmap wins: {t:?}");
        assert!(mmap64 > 1.2 * rw64, "{tool}: at 64K read/write wins: {t:?}");
        assert!(
            rw1 > 2.0 * rw64,
            "{tool}: larger blocks help read/write: {t:?}"
        );
    }

    // The why: strace counts read/write calls as the truth predicts.
    let expect = truth("memory", "0", &["1", "1K", src.to_str().unwrap()]);
    let want = expect["syscalls"].as_f64().unwrap();
    let out = Command::new("strace")
        .args(["-f", "-c", "-e", "trace=read,write", "-o"])
        .arg(tmp.path().join("strace.txt"))
        .args(cmd("1", "1K"))
        .stdout(Stdio::null())
        .status()
        .expect("strace is installed");
    assert!(out.success());
    let summary = std::fs::read_to_string(tmp.path().join("strace.txt")).unwrap();
    let calls: f64 = summary
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            matches!(f.last(), Some(&"read") | Some(&"write")).then(|| f[3].parse::<f64>().ok())?
        })
        .sum();
    eprintln!("memory rw 1K: strace counted {calls} read+write calls, truth {want}");
    assert!((calls - want).abs() <= 20.0, "{summary}");
}

// ---------------------------------------------------------------- lock-contend

/// lock-contend: the workers spend most of their time waiting in futex,
/// by /proc/TID/syscall, by strace -w and by kdiag diagnose.
#[test]
fn lock_contend_threads_mostly_wait_in_futex() {
    let _one = serial();
    if !require_root("lock_contend_threads_mostly_wait_in_futex") {
        return;
    }
    let seed = "symptom-lock";
    let expect = truth("lock-contend", seed, &[]);
    let n = expect["threads"].as_u64().unwrap() as usize;
    let prefix = expect["thread_name_prefix"].as_str().unwrap().to_string();
    let kids = Kids(vec![spawn(
        "lock-contend",
        &["--seed", seed, "--duration", "8"],
    )]);
    let pid = kids.0[0].id();
    let workers = || {
        threads(pid)
            .into_iter()
            .filter(|t| t.1.starts_with(&prefix))
            .collect::<Vec<_>>()
    };
    wait_for("the workers", Duration::from_secs(5), || {
        workers().len() == n
    });

    let (mut futex, mut total) = (0, 0);
    for _ in 0..25 {
        for (tid, _, _) in workers() {
            let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall"))
            else {
                continue;
            };
            total += 1;
            if text.split_whitespace().next() == Some(&libc::SYS_futex.to_string()) {
                futex += 1;
            }
        }
        sleep(Duration::from_millis(40));
    }
    let proc_share = futex as f64 / total as f64;

    // strace -w -c: wall-clock time inside each system call.
    let out = Command::new("timeout")
        .args(["-s", "INT", "2", "strace", "-f", "-w", "-c", "-p"])
        .arg(pid.to_string())
        .output()
        .expect("strace is installed");
    let summary = stderr(&out);
    let share_of = |name: &str| -> f64 {
        summary
            .lines()
            .find(|l| l.split_whitespace().last() == Some(name))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .unwrap_or(0.0)
    };
    let strace_share = share_of("futex") / 100.0;

    let report = diagnose(pid, "2");
    let samples = report["observation"]["samples"].as_array().unwrap();
    let count = |pred: &dyn Fn(&Value) -> bool| -> f64 {
        samples
            .iter()
            .filter(|s| pred(s))
            .map(|s| s["count"].as_f64().unwrap())
            .sum()
    };
    let sleeping = count(&|s| s["state"] == "S");
    let in_futex = count(&|s| s["state"] == "S" && s["wchan"].as_str().unwrap().contains("futex"));
    let kd_share = in_futex / sleeping;
    eprintln!(
        "lock-contend ({n} workers): futex share /proc {proc_share:.2}, strace -w {strace_share:.2}, \
         kdiag diagnose {kd_share:.2} ({})",
        report["diagnosis"]["summary"]
    );
    assert!(proc_share >= 0.5, "/proc: futex {proc_share:.2}");
    assert!(
        strace_share >= 0.5,
        "strace: futex {strace_share:.2}\n{summary}"
    );
    assert!(kd_share >= 0.5, "kdiag diagnose: futex {kd_share:.2}");
    assert_eq!(report["diagnosis"]["verdict"], "lock", "{report:#}");
    assert!(cpu_secs(pid) < 1.0, "lock-bound, not CPU-bound");
}

// ---------------------------------------------------------------- mem-leak

/// mem-leak: RSS grows linearly at the truth's rate, by /proc and by kdiag
/// diagnose's RSS series.
#[test]
fn mem_leak_rss_grows_at_its_rate() {
    let _one = serial();
    if !require_root("mem_leak_rss_grows_at_its_rate") {
        return;
    }
    let seed = "symptom-leak";
    let rate = truth("mem-leak", seed, &[])["rate_bytes_per_s"]
        .as_f64()
        .unwrap();
    let mut kids = Kids(vec![spawn(
        "mem-leak",
        &["--seed", seed, "--duration", "8"],
    )]);
    let pid = kids.0[0].id();
    let rss = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .unwrap();
        kb.trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<f64>()
            .unwrap()
            * 1024.0
    };
    sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    let mut points = vec![];
    while t0.elapsed() < Duration::from_secs(2) {
        points.push((t0.elapsed().as_secs_f64(), rss()));
        sleep(Duration::from_millis(100));
    }
    let proc_slope = slope(&points);
    let report = diagnose(pid, "2");
    let series: Vec<(f64, f64)> = report["observation"]["rss_kib"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_f64().unwrap(), p[1].as_f64().unwrap() * 1024.0))
        .collect();
    let kd_slope = slope(&series);
    let mib = |b: f64| b / (1 << 20) as f64;
    eprintln!(
        "mem-leak: truth {:.2} MiB/s; RSS slope /proc {:.2} MiB/s, kdiag diagnose {:.2} MiB/s ({})",
        mib(rate),
        mib(proc_slope),
        mib(kd_slope),
        report["diagnosis"]["summary"]
    );
    for (tool, s) in [("/proc", proc_slope), ("kdiag diagnose", kd_slope)] {
        assert!(
            (s / rate - 1.0).abs() <= 0.3,
            "{tool}: slope {:.2} MiB/s vs {:.2}",
            mib(s),
            mib(rate)
        );
    }
    assert_eq!(report["diagnosis"]["verdict"], "memory-trend");
    kids.0[0].kill().unwrap();
}

// ---------------------------------------------------------------- names

/// The seed picks which of several compiled copies does the work, so a
/// profile names a seed-dependent function: frame pointers carry it into
/// kdiag profile's stacks.
#[test]
fn seeded_function_names_show_in_kdiag_profile() {
    let _one = serial();
    if !require_root("seeded_function_names_show_in_kdiag_profile") {
        return;
    }
    let tmp = disk_tempdir();
    let scratch = |n: &str| tmp.path().join(n).to_str().unwrap().to_string();
    let seed = "symptom-names";
    // (workload, arguments, fact, least share of stacks): a scheduling
    // task is short, most of fork mode's time is fork itself.
    let cases: [(&str, Vec<String>, &str, f64); 3] = [
        (
            "memory",
            vec!["1".into(), "1K".into(), "--size".into(), "64M".into()],
            "copy_function",
            20.0,
        ),
        ("scheduling", vec!["1".into()], "worker_function", 1.0),
        (
            "io-app",
            vec![
                "--size".into(),
                "1M".into(),
                "--duration".into(),
                "2".into(),
            ],
            "write_function",
            20.0,
        ),
    ];
    for (name, args, fact, least) in cases {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let function = truth(name, seed, &refs)[fact].as_str().unwrap().to_string();
        let bin = workload(name);
        let folded = tmp.path().join(format!("{name}.folded"));
        let mut cmd = vec!["profile", "-F", "999", "--folded", folded.to_str().unwrap()];
        cmd.extend(["--", bin.to_str().unwrap()]);
        cmd.extend(&refs);
        let dir = scratch(name);
        cmd.extend(["--seed", seed, "--scratch", &dir]);
        let out = run_kdiag(&cmd);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        // Share of the samples whose stack passes through the function.
        let (mut with, mut all) = (0u64, 0u64);
        let frame = format!("::{function}");
        for line in std::fs::read_to_string(&folded).unwrap().lines() {
            let (stack, count) = line.rsplit_once(' ').unwrap();
            let count: u64 = count.parse().unwrap();
            all += count;
            if stack.split(';').any(|f| f.ends_with(&frame)) {
                with += count;
            }
        }
        let percent = 100.0 * with as f64 / all.max(1) as f64;
        eprintln!("{name} seed {seed}: {fact} {function} on {percent:.1}% of {all} stacks");
        assert!(
            percent >= least,
            "{name}: {function} on {percent}% of stacks"
        );
    }
}
