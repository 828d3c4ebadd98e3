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

/// A finishing workload run as a service (memory copying again and again)
/// creates its output while SIGTERM's clean-up may be emptying the
/// directory: the directory still goes, whenever the signal comes (without
/// retrying, about one run in ten left the copy behind).
#[test]
fn a_repeating_copy_leaves_nothing_on_sigterm() {
    let tmp = disk_tempdir();
    for i in 0..40u64 {
        let dir = tmp.path().join(format!("copy{i}"));
        let child = spawn(
            "memory",
            &[
                "1",
                "1K",
                "--seed",
                "mem-a-1",
                "--duration",
                "0",
                "--scratch",
                dir.to_str().unwrap(),
            ],
        );
        // Somewhere in creating the source or in a copy, spread over 0.9 s.
        std::thread::sleep(Duration::from_millis((i * 29 % 90) * 10));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        wait4(child);
        assert!(!dir.exists(), "run {i}: scratch directory left");
    }
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
    let run = |args: &[&str]| {
        let mut all = vec!["--duration", "1"];
        all.extend(args);
        let (status, ru) = wait4(spawn("cpu-burn", &all));
        assert_eq!(status, 0);
        (tv_secs(ru.ru_utime), tv_secs(ru.ru_stime))
    };
    let (uu, us) = run(&["--mode", "user"]);
    eprintln!("cpu-burn user: {uu:.2} user {us:.2} sys");
    // Coarse: the machine may be shared, so only the split is checked.
    assert!(uu > 0.1 && uu > 2.0 * us, "user mode burns user time");
    // Every system call a seed may pick, found by asking the seeds.
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..32 {
        let seed = seed.to_string();
        let expect = run_kdiag(&[
            "workload", "describe", "cpu-burn", "--seed", &seed, "--mode", "kernel",
        ]);
        assert!(expect.status.success(), "{}", stderr(&expect));
        let expect: serde_json::Value = serde_json::from_slice(&expect.stdout).unwrap();
        let syscall = expect["expect"]["syscall"].as_str().unwrap().to_string();
        if !seen.insert(syscall.clone()) {
            continue;
        }
        let (ku, ks) = run(&["--mode", "kernel", "--seed", &seed]);
        eprintln!("cpu-burn kernel ({syscall}, seed {seed}): {ku:.2} user {ks:.2} sys");
        // Twice, not just more: the calls do their work in the kernel, and a
        // split near even would mean the ticks land on entry and exit.
        assert!(
            ks > 2.0 * ku,
            "kernel mode ({syscall}) burns mostly system time"
        );
    }
    assert_eq!(seen.len(), 4, "the seeds pick every system call: {seen:?}");
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
        ("bad-elf", vec![]),
    ] {
        let mut args = vec![name, "--seed", "7"];
        args.extend(&extra);
        let doc = describe(&args);
        assert_eq!(doc["schema"], 2);
        assert_eq!(doc["workload"]["name"], name);
        assert_eq!(doc["workload"]["seed"], "7");
        assert!(doc["expect"]["class"].is_string(), "{name}: expect.class");
        let given = doc["workload"]["args"].as_array().unwrap();
        assert!(
            given.iter().any(|a| a == "7"),
            "{name}: args reproduce the run"
        );
        assert!(
            doc["expect"]["summary"].is_string(),
            "{name}: expect.summary"
        );
        assert_eq!(doc, describe(&args), "{name}: same seed, same truth");
        let storage = match name {
            "io-app" | "bio" | "io-stall" => "disk",
            "memory" => "any",
            _ => "none",
        };
        assert_eq!(doc["workload"]["storage"], storage, "{name}: storage");
        // kdiag prints exactly what the library computes in-process.
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let lib: serde_json::Value =
            serde_json::from_str(&kdiag_workloads::describe(name, "7", &extra).unwrap()).unwrap();
        assert_eq!(doc, lib, "{name}");
    }
    let classic = describe(&["cpu-burn"]);
    assert_eq!(classic["expect"]["hottest"], "burn_hot_alpha");
    assert_eq!(classic["expect"]["hot_functions"][0]["share"], 0.75);
    let files: std::collections::BTreeSet<String> = ["1", "2", "3", "alice", "bob"]
        .iter()
        .map(|s| describe(&["io-app", "--seed", s])["expect"]["file"].to_string())
        .collect();
    assert!(files.len() >= 4, "seeds vary the file name: {files:?}");
    assert!(
        files.iter().all(|f| !f.contains('/')),
        "names, not paths: {files:?}"
    );

    // A course token's truth is the instructor's; a bad token is a usage error.
    let out = run_kdiag(&["workload", "describe", "bio", "--seed", "k3m9-x2pq-7vtz"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(
        stderr(&out).contains(
            "the truth of a course seed is for the instructor: kdiag lab solution --course FILE"
        ),
        "{}",
        stderr(&out)
    );
    let out = run_kdiag(&["workload", "describe", "bio", "--seed", "no/slash"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--seed"), "{}", stderr(&out));
    // Running a course seed is fine, but its run does not announce the facts.
    let out = run_kdiag(&[
        "workload",
        "run",
        "scheduling",
        "0",
        "--seed",
        "k3m9-x2pq-7vtz",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let tasks = kdiag_workloads::describe("scheduling", "k3m9-x2pq-7vtz", &["0".into()]).unwrap();
    let tasks: serde_json::Value = serde_json::from_str(&tasks).unwrap();
    let n = tasks["expect"]["tasks"].to_string();
    assert!(
        stdout(&out).contains("all threads done") && !stdout(&out).contains(&n),
        "{}",
        stdout(&out)
    );
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

#[test]
fn an_installed_kdiag_finds_its_workloads_in_usr_lib_kdiag() {
    // The .deb's layout (packaging/): kdiag in usr/bin, the workloads in
    // usr/lib/kdiag. Hard links, not copies or symlinks: /proc/self/exe
    // names the link that ran, and no 80 MB is copied.
    let root = tempfile::Builder::new()
        .prefix("kdiag-installed")
        .tempdir_in(bin_dir())
        .unwrap();
    let (bin, lib) = (
        root.path().join("usr/bin"),
        root.path().join("usr/lib/kdiag"),
    );
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::hard_link(env!("CARGO_BIN_EXE_kdiag"), bin.join("kdiag")).unwrap();
    let installed = |args: &[&str]| Command::new(bin.join("kdiag")).args(args).output().unwrap();

    let out = installed(&["workload", "run", "scheduling", "0", "2"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("install the kdiag package"),
        "says where the workloads come from: {}",
        stderr(&out)
    );

    let list: serde_json::Value =
        serde_json::from_slice(&run_kdiag(&["workload", "list", "--json"]).stdout).unwrap();
    for w in list.as_array().unwrap() {
        let name = w["name"].as_str().unwrap();
        std::fs::hard_link(workload(name), lib.join(name)).unwrap();
    }
    let out = installed(&["workload", "list", "--json"]);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for w in list.as_array().unwrap() {
        assert_eq!(w["built"], true, "{w}");
        assert_eq!(
            w["path"],
            lib.join(w["name"].as_str().unwrap()).display().to_string()
        );
    }
    let out = installed(&["workload", "run", "scheduling", "0", "20"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("20 threads"), "{}", stdout(&out));
}

/// `memory --copies N` makes N copies back to back and stops (3-memory
/// times five, so that the copies outweigh the source's creation and the
/// noise); zero copies is a usage error.
#[test]
fn memory_makes_the_copies_asked_for() {
    let tmp = disk_tempdir();
    for mode in ["0", "1"] {
        let dir = tmp.path().join(format!("copies{mode}"));
        let out = run_kdiag(&[
            "workload",
            "run",
            "memory",
            mode,
            "4K",
            "--size",
            "1M",
            "--copies",
            "3",
            "--scratch",
            dir.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let copies = stdout(&out)
            .lines()
            .filter(|l| l.contains("copied"))
            .count();
        assert_eq!(copies, 3, "mode {mode}: {}", stdout(&out));
    }
    let out = run_kdiag(&["workload", "run", "memory", "1", "1K", "--copies", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--copies"), "{}", stderr(&out));
}
