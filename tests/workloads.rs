//! The bundled workloads really misbehave, measurably, and leave nothing
//! behind. Build them first: `cargo build --workspace` (or run the tests with
//! `cargo test --workspace`).

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// A temporary directory on a disk-backed file system (the I/O workloads
/// refuse tmpfs, and /tmp may be tmpfs).
fn disk_tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("kdiag-wl-test")
        .tempdir_in("/var/tmp")
        .expect("tempdir in /var/tmp")
}

fn spawn(name: &str, args: &[&str]) -> Child {
    Command::new(workload(name))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
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

/// A field of /proc/PID/io.
fn proc_io(pid: u32, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/io")).expect("read /proc/PID/io");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}: ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{key} in /proc/{pid}/io"))
}

/// (comm, state, utime+stime ticks) of every thread of `pid`.
fn threads(pid: u32) -> Vec<(u32, String, char)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let tid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let comm = stat[stat.find('(')? + 1..stat.rfind(')')?].to_string();
            let state = stat[stat.rfind(')')? + 2..].chars().next()?;
            Some((tid, comm, state))
        })
        .collect()
}

/// utime + stime of the whole process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Tasks blocked on I/O right now, machine-wide (/proc/stat procs_blocked).
fn procs_blocked() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    stat.lines()
        .find_map(|l| l.strip_prefix("procs_blocked "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

fn load1() -> f64 {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap();
    text.split_whitespace().next().unwrap().parse().unwrap()
}

/// Wait for a child with wait4 and return its exit status and rusage
/// (which covers the children it waited for).
fn wait4(child: Child) -> (i32, libc::rusage) {
    let mut status = 0;
    // SAFETY: rusage is a plain out-parameter.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as i32;
    std::mem::forget(child);
    // SAFETY: waiting for our own child, with valid out-pointers.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(rc, pid, "wait4");
    (status, ru)
}

fn tv_secs(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

#[test]
fn io_app_rewrites_one_range_with_synchronous_writes() {
    let tmp = disk_tempdir();
    let dir = tmp.path().join("io-app");
    let size: u64 = 2 << 20;
    let child = spawn(
        "io-app",
        &[
            "--size",
            "2M",
            "--duration",
            "4",
            "--scratch",
            dir.to_str().unwrap(),
        ],
    );
    let pid = child.id();
    let data = dir.join("lab008.data");
    wait_for("the data file", Duration::from_secs(5), || data.exists());
    wait_for("a first pass", Duration::from_secs(5), || {
        proc_io(pid, "syscw") >= 2
    });

    // The data file's descriptor is open with O_SYNC (octal 04010000).
    let fd = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .find(|e| std::fs::read_link(e.path()).is_ok_and(|t| t == data))
        .expect("io-app holds the data file open");
    let fdinfo = std::fs::read_to_string(format!(
        "/proc/{pid}/fdinfo/{}",
        fd.file_name().to_str().unwrap()
    ))
    .unwrap();
    let flags = fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .map(|f| u64::from_str_radix(f.trim(), 8).unwrap())
        .unwrap();
    assert_eq!(
        flags & 0o4010000,
        0o4010000,
        "O_SYNC in fdinfo flags {flags:o}"
    );

    let (w0, b0) = (proc_io(pid, "wchar"), proc_io(pid, "write_bytes"));
    sleep(Duration::from_millis(1500));
    let (w1, b1) = (proc_io(pid, "wchar"), proc_io(pid, "write_bytes"));
    let passes = (w1 - w0) / size;
    eprintln!(
        "io-app: {passes} passes of {size} bytes in 1.5 s, {} bytes to storage",
        b1 - b0
    );
    // Whole writes of the region, again and again, reaching storage, while
    // the file never grows: the same range is rewritten.
    assert!(passes >= 2, "only {passes} passes");
    assert_eq!((w1 - w0) % size, 0, "writes are whole passes of the region");
    assert!(b1 - b0 >= size, "data reached storage: {} bytes", b1 - b0);
    assert_eq!(
        std::fs::metadata(&data).unwrap().len(),
        size,
        "file stays one region long"
    );

    let (status, _) = wait4(child);
    assert_eq!(status, 0, "io-app ends cleanly at --duration");
    assert!(!dir.exists(), "scratch directory removed on exit");
}

#[test]
fn scheduling_fork_mode_costs_many_more_faults_and_system_time() {
    let run = |mode: &str| {
        let (status, ru) = wait4(spawn("scheduling", &[mode]));
        assert_eq!(status, 0);
        (ru.ru_minflt as f64, tv_secs(ru.ru_stime))
    };
    let threads: Vec<_> = (0..3).map(|_| run("0")).collect();
    let forks: Vec<_> = (0..3).map(|_| run("1")).collect();
    let (tf, ts) = (
        median(threads.iter().map(|r| r.0).collect()),
        median(threads.iter().map(|r| r.1).collect()),
    );
    let (ff, fs) = (
        median(forks.iter().map(|r| r.0).collect()),
        median(forks.iter().map(|r| r.1).collect()),
    );
    eprintln!("scheduling: threads {tf} faults {ts:.3} s sys; fork {ff} faults {fs:.3} s sys");
    assert!(ff >= 4.0 * tf, "fork faults {ff} vs threads {tf}");
    assert!(
        fs >= 2.0 * ts.max(0.001),
        "fork system time {fs} vs threads {ts}"
    );
}

#[test]
fn memory_read_write_with_1k_blocks_is_slowest() {
    let tmp = disk_tempdir();
    let dir = tmp.path().join("memory");
    // The copy's CPU time (user + system, as the workload reports it): on a
    // shared machine, wall time mostly measures waiting for a CPU.
    let cost = |args: &[&str]| -> f64 {
        let mut all = args.to_vec();
        all.extend([
            "--size",
            "32M",
            "--verify",
            "--scratch",
            dir.to_str().unwrap(),
        ]);
        let out = Command::new(workload("memory"))
            .args(&all)
            .output()
            .unwrap();
        let text = stdout(&out);
        assert!(out.status.success(), "memory {all:?}: {}", stderr(&out));
        assert!(text.contains("verified"), "copy verified: {text}");
        let cpu = text
            .split("(cpu ")
            .nth(1)
            .unwrap_or_else(|| panic!("cpu in {text}"));
        let words: Vec<&str> = cpu.split_whitespace().collect();
        words[0].parse::<f64>().unwrap() + words[4].parse::<f64>().unwrap()
    };
    // Interleaved, so a burst of load elsewhere hits all three alike.
    let (mut mmap, mut rw1k, mut rw64k) = (vec![], vec![], vec![]);
    for _ in 0..5 {
        mmap.push(cost(&["0", "1K"]));
        rw1k.push(cost(&["1", "1K"]));
        rw64k.push(cost(&["1", "64K"]));
    }
    let (mmap, rw1k, rw64k) = (median(mmap), median(rw1k), median(rw64k));
    eprintln!(
        "memory 32 MiB, CPU s (medians of 5): mmap {mmap:.4}, read/write 1K {rw1k:.4}, 64K {rw64k:.4}"
    );
    assert!(
        rw1k > rw64k,
        "1K blocks ({rw1k}) cost more than 64K ({rw64k})"
    );
    assert!(
        rw1k > mmap,
        "1K blocks ({rw1k}) cost more than mmap ({mmap})"
    );
    assert!(!dir.exists());
}

#[test]
fn bio_threads_sit_in_d_state_and_raise_the_load() {
    let mut before = 0;
    for _ in 0..10 {
        before += procs_blocked();
        sleep(Duration::from_millis(30));
    }
    let tmp = disk_tempdir();
    let dir = tmp.path().join("bio");
    let child = spawn(
        "bio",
        &["--duration", "5", "--scratch", dir.to_str().unwrap()],
    );
    let pid = child.id();
    let readers = || {
        threads(pid)
            .into_iter()
            .filter(|t| t.1.starts_with("bio-read-"))
            .collect::<Vec<_>>()
    };
    wait_for("20 reader threads", Duration::from_secs(10), || {
        readers().len() == 20
    });
    let (l0, c0, t0) = (load1(), cpu_ticks(pid), Instant::now());
    let (mut samples, mut d_seen, mut max_d, mut busy, mut blocked) = (0, 0, 0, 0, 0);
    while t0.elapsed() < Duration::from_secs(3) {
        let ts = readers();
        let d = ts.iter().filter(|t| t.2 == 'D').count();
        busy += ts.iter().filter(|t| t.2 == 'D' || t.2 == 'R').count();
        d_seen += d;
        max_d = max_d.max(d);
        blocked += procs_blocked();
        samples += 1;
        sleep(Duration::from_millis(50));
    }
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let cpus = (cpu_ticks(pid) - c0) as f64 / hz / t0.elapsed().as_secs_f64();
    let l1 = load1();
    let contribution = busy as f64 / samples as f64;
    let (blocked_before, blocked) = (before as f64 / 10.0, blocked as f64 / samples as f64);
    eprintln!(
        "bio: {samples} samples, {d_seen} reader-thread D observations (max {max_d} at once), \
         load contribution {contribution:.1}, procs_blocked {blocked_before:.1} -> {blocked:.1}, process CPU {cpus:.2} CPUs, load1 {l0} -> {l1}"
    );
    assert!(max_d >= 5, "at most {max_d} readers in D at once");
    assert!(
        d_seen as f64 >= 0.05 * (samples * 20) as f64,
        "readers rarely in D: {d_seen}"
    );
    assert!(
        contribution >= 2.0,
        "runnable+D readers average {contribution:.1}"
    );
    assert!(
        cpus < 0.9,
        "bio keeps the CPU mostly idle, used {cpus:.2} CPUs"
    );
    // The load average is a slow (5 s) exponential average of runnable +
    // uninterruptible tasks machine-wide; on a shared machine other jobs
    // move it more than a few seconds of bio. So the test checks its input:
    // the readers' own R+D count above, and the machine's blocked tasks.
    assert!(
        blocked >= blocked_before + 2.0,
        "procs_blocked rose only {blocked_before:.1} -> {blocked:.1}"
    );
    let (status, _) = wait4(child);
    assert_eq!(status, 0);
    assert!(!dir.exists());
}

#[test]
fn io_stall_dirties_bursts_for_almost_no_cpu() {
    let tmp = disk_tempdir();
    let dir = tmp.path().join("io-stall");
    let child = spawn(
        "io-stall",
        &[
            "--burst",
            "32M",
            "--period",
            "1s",
            "--duration",
            "4",
            "--scratch",
            dir.to_str().unwrap(),
        ],
    );
    let pid = child.id();
    wait_for("a first burst", Duration::from_secs(5), || {
        proc_io(pid, "write_bytes") >= 32 << 20
    });
    let (w0, c0, t0) = (proc_io(pid, "write_bytes"), cpu_ticks(pid), Instant::now());
    sleep(Duration::from_millis(2500));
    let (w1, c1) = (proc_io(pid, "write_bytes"), cpu_ticks(pid));
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let cpus = (c1 - c0) as f64 / hz / t0.elapsed().as_secs_f64();
    eprintln!(
        "io-stall: {} MiB dirtied in 2.5 s for {cpus:.3} CPUs",
        (w1 - w0) >> 20
    );
    // Each burst re-dirties pages the previous syncfs cleaned: charged again.
    assert!(w1 - w0 >= 48 << 20, "bursts dirtied {} bytes", w1 - w0);
    assert!(cpus < 0.25, "the culprit stays cheap: {cpus:.3} CPUs");
    assert_eq!(wait4(child).0, 0);
    assert!(!dir.exists());
}

#[test]
fn lock_contend_threads_mostly_wait_in_futex() {
    let child = spawn("lock-contend", &["--duration", "3"]);
    let pid = child.id();
    let workers = || {
        threads(pid)
            .into_iter()
            .filter(|t| t.1.starts_with("lock-worker-"))
            .collect::<Vec<_>>()
    };
    wait_for("4 workers", Duration::from_secs(5), || workers().len() == 4);
    let (mut futex, mut total) = (0, 0);
    for _ in 0..30 {
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
        sleep(Duration::from_millis(50));
    }
    let share = futex as f64 / total as f64;
    eprintln!("lock-contend: {futex}/{total} worker samples in futex ({share:.2})");
    assert!(share >= 0.5, "workers in futex only {share:.2} of the time");
    let (status, ru) = wait4(child);
    assert_eq!(status, 0);
    let cpu = tv_secs(ru.ru_utime) + tv_secs(ru.ru_stime);
    assert!(
        cpu < 1.0,
        "lock-bound, not CPU-bound: {cpu:.2} s CPU in 3 s"
    );
}

#[test]
fn mem_leak_rss_grows_steadily() {
    let child = spawn("mem-leak", &["--rate", "8M", "--duration", "3"]);
    let pid = child.id();
    let rss = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .unwrap();
        kb.trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<u64>()
            .unwrap()
            * 1024
    };
    sleep(Duration::from_millis(300));
    let mut samples = Vec::new();
    for _ in 0..5 {
        samples.push(rss());
        sleep(Duration::from_millis(400));
    }
    eprintln!("mem-leak RSS samples: {samples:?}");
    assert!(
        samples.windows(2).all(|w| w[1] >= w[0]),
        "RSS never shrinks"
    );
    let grown = samples[4] - samples[0];
    assert!(
        grown >= 8 << 20,
        "RSS grew only {grown} bytes in 1.6 s at 8 MiB/s"
    );
    assert_eq!(wait4(child).0, 0);
}

fn start_and_wait_for_scratch(dir: &Path) -> Child {
    let child = spawn(
        "io-app",
        &[
            "--size",
            "1M",
            "--duration",
            "30",
            "--scratch",
            dir.to_str().unwrap(),
        ],
    );
    // Ready once the owner file names this run and the data file exists.
    let me = format!("{} ", child.id());
    wait_for("the scratch directory", Duration::from_secs(5), || {
        std::fs::read_to_string(dir.join(".kdiag-owner")).is_ok_and(|o| o.starts_with(&me))
            && dir.join("lab008.data").exists()
    });
    child
}

#[test]
fn scratch_is_removed_on_sigint_and_sigterm() {
    let tmp = disk_tempdir();
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let dir = tmp.path().join(format!("sig{sig}"));
        let child = start_and_wait_for_scratch(&dir);
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let (status, _) = wait4(child);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 128 + sig,
            "status {status:#x}"
        );
        assert!(!dir.exists(), "scratch directory left after signal {sig}");
    }
    assert!(
        tmp.path().exists(),
        "a --scratch DIR's parent is the user's: kept"
    );
}

#[test]
fn scratch_left_by_sigkill_is_removed_at_the_next_start() {
    let tmp = disk_tempdir();
    // Same directory: the restart replaces the stale one.
    let dir = tmp.path().join("io-app");
    let child = start_and_wait_for_scratch(&dir);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    wait4(child);
    assert!(
        dir.exists(),
        "SIGKILL cannot be caught: the directory is left"
    );
    std::fs::write(dir.join("stale-marker"), "x").unwrap();
    let child = start_and_wait_for_scratch(&dir);
    assert!(
        !dir.join("stale-marker").exists(),
        "stale directory replaced at start"
    );
    // A sibling run (the default layout keeps one directory per workload
    // under a shared base) sweeps stale directories it finds next to it.
    let other = tmp.path().join("sibling");
    let other_child = start_and_wait_for_scratch(&other);
    unsafe { libc::kill(other_child.id() as i32, libc::SIGKILL) };
    wait4(other_child);
    assert!(other.exists());
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    wait4(child);
    let out = Command::new(workload("io-app"))
        .args([
            "--size",
            "1M",
            "--duration",
            "0.2",
            "--scratch",
            tmp.path().join("third").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let left: Vec<PathBuf> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "stale directories swept: {left:?}");
}

#[test]
fn a_running_workload_keeps_its_scratch_directory() {
    let tmp = disk_tempdir();
    let dir = tmp.path().join("io-app");
    let child = start_and_wait_for_scratch(&dir);
    let out = Command::new(workload("io-app"))
        .args(["--duration", "1", "--scratch", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("in use by a running workload"),
        "{}",
        stderr(&out)
    );
    assert!(
        dir.join("lab008.data").exists(),
        "the running one's files are untouched"
    );
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    wait4(child);
}

#[test]
fn cpu_burn_user_and_kernel_modes_spend_time_where_they_say() {
    let run = |mode: &str| {
        let (status, ru) = wait4(spawn("cpu-burn", &["--mode", mode, "--duration", "1"]));
        assert_eq!(status, 0);
        (tv_secs(ru.ru_utime), tv_secs(ru.ru_stime))
    };
    let (uu, us) = run("user");
    let (ku, ks) = run("kernel");
    eprintln!("cpu-burn user: {uu:.2} user {us:.2} sys; kernel: {ku:.2} user {ks:.2} sys");
    // Coarse: the machine may be shared, so only the split is checked.
    assert!(uu > 0.1 && uu > 2.0 * us, "user mode burns user time");
    assert!(ks > ku, "kernel mode burns mostly system time");
}

#[test]
fn describe_is_deterministic_ground_truth() {
    let describe = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["workload", "describe"];
        all.extend(args);
        let out = run_kdiag(&all);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).expect("describe prints JSON")
    };
    for (name, extra) in [
        ("io-app", vec![]),
        ("scheduling", vec!["1"]),
        ("memory", vec!["1", "1K"]),
        ("bio", vec![]),
        ("io-stall", vec![]),
        ("cpu-burn", vec![]),
        ("lock-contend", vec![]),
        ("mem-leak", vec![]),
    ] {
        let mut args = vec![name, "--seed", "7"];
        args.extend(&extra);
        let doc = describe(&args);
        assert_eq!(doc["schema"], 1);
        assert_eq!(doc["workload"]["name"], name);
        assert_eq!(doc["workload"]["seed"], 7);
        assert!(doc["expect"]["class"].is_string(), "{name}: expect.class");
        let given = doc["workload"]["args"].as_array().unwrap();
        assert!(
            given.iter().any(|a| a == "7"),
            "{name}: args reproduce the run"
        );
        assert!(
            !given.iter().any(|a| a == "--describe"),
            "{name}: args reproduce the run"
        );
        assert!(
            doc["expect"]["summary"].is_string(),
            "{name}: expect.summary"
        );
        assert_eq!(doc, describe(&args), "{name}: same seed, same truth");
        let writes_files = ["io-app", "memory", "bio", "io-stall"].contains(&name);
        assert_eq!(
            doc["workload"]["scratch"].is_string(),
            writes_files,
            "{name}: scratch"
        );
    }
    let classic = describe(&["cpu-burn"]);
    assert_eq!(classic["expect"]["hottest"], "burn_hot_alpha");
    assert_eq!(classic["expect"]["hot_functions"][0]["share"], 0.75);
    let files: std::collections::BTreeSet<String> = (1..=5)
        .map(|s| describe(&["io-app", "--seed", &s.to_string()])["expect"]["file"].to_string())
        .collect();
    assert!(files.len() >= 4, "seeds vary the file name: {files:?}");
}

#[test]
fn workload_command_lists_runs_and_explains_errors() {
    let out = run_kdiag(&["workload", "list", "--json"]);
    assert!(out.status.success());
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    for name in [
        "io-app",
        "scheduling",
        "memory",
        "bio",
        "io-stall",
        "cpu-burn",
        "lock-contend",
        "mem-leak",
        "bad-elf",
    ] {
        assert!(names.contains(&name), "list has {name}");
    }
    assert_eq!(list[0]["built"], true);

    let out = run_kdiag(&["workload", "run", "scheduling", "0", "20"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("20 threads"), "{}", stdout(&out));

    let out = run_kdiag(&["workload", "run", "no-such"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("io-app"),
        "names the workloads: {}",
        stderr(&out)
    );

    let out = run_kdiag(&["workload", "run", "memory", "7", "1K"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "the workload's usage error passes through"
    );
}

#[test]
fn build_module_says_what_to_install_without_headers() {
    let out = run_kdiag(&[
        "workload",
        "build-module",
        "io",
        "--kernel-dir",
        "/nonexistent",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("kernel headers not found") && err.contains("linux-headers"),
        "{err}"
    );
    let out = run_kdiag(&["workload", "build-module", "nope"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn build_module_compiles_where_headers_exist() {
    // Any installed kernel build directory will do for a compile check
    // (loading the module is never done by a test: it freezes a CPU).
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut dirs = vec![PathBuf::from(format!(
        "/lib/modules/{}/build",
        release.trim()
    ))];
    if let Ok(entries) = std::fs::read_dir("/usr/src") {
        dirs.extend(entries.flatten().map(|e| e.path()));
    }
    let Some(kdir) = dirs
        .into_iter()
        .find(|d| d.join("Makefile").is_file() && d.join("include/config/auto.conf").is_file())
    else {
        eprintln!("SKIPPED build_module_compiles_where_headers_exist: no kernel headers installed");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = run_kdiag(&[
        "workload",
        "build-module",
        "io",
        "--out",
        tmp.path().to_str().unwrap(),
        "--kernel-dir",
        kdir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(
        tmp.path().join("kdiag_io.ko").is_file(),
        "module built against {}",
        kdir.display()
    );
}
