//! `kdiag diagnose` on the software people run: with `--tree` the
//! drill-downs trace the members that carry the verdict, never a parent
//! that only waits for them; runtimes' locks (the CPython GIL, a JVM
//! monitor) are named from the waiting threads' stacks.

mod common;

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::own_cpu::OwnCpu;
use common::{command, require_root};
use serde_json::Value;

/// A parent asleep in pause() with two children (named kdiag-kid) that
/// spin 10 ms, read 4 KiB of `file` from the disk (its cache dropped
/// first), sleep 5 ms, again until the parent is gone.
const FAMILY: &str = r#"
import os, random, signal, sys, time
path, parent = sys.argv[1], os.getpid()
def kid():
    with open('/proc/self/comm', 'w') as f:
        f.write('kdiag-kid')
    fd = os.open(path, os.O_RDONLY)
    pages = os.fstat(fd).st_size // 4096
    while os.getppid() == parent:
        end = time.perf_counter() + 0.01
        while time.perf_counter() < end:
            pass
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.pread(fd, 4096, random.randrange(pages) * 4096)
        time.sleep(0.005)
    os._exit(0)
kids = [os.fork() for _ in range(2)]
if 0 in kids:
    kid()
print(*kids, flush=True)
signal.pause()
"#;

struct Family {
    parent: Child,
    kids: Vec<i64>,
}

impl Drop for Family {
    fn drop(&mut self) {
        // The children leave when their parent is gone.
        let _ = self.parent.kill();
        let _ = self.parent.wait();
    }
}

fn family(file: &std::path::Path) -> Family {
    let mut parent = command("python3")
        .args(["-c", FAMILY])
        .arg(file)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(parent.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let kids = line
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    // The children have named themselves.
    let t = Instant::now();
    let family = Family { parent, kids };
    while family.kids.iter().any(|k| {
        std::fs::read_to_string(format!("/proc/{k}/comm")).unwrap_or_default() != "kdiag-kid\n"
    }) {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the children did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    family
}

/// Every folded line of a drill-down's flame graph is a child's.
fn only_kids(why: &Value, flame: &str) -> usize {
    let lines = why[flame]["lines"].as_array().expect(flame);
    assert!(!lines.is_empty(), "{flame}: nothing recorded: {why}");
    for l in lines {
        let l = l.as_str().unwrap();
        assert!(l.starts_with("kdiag-kid;"), "{flame} has {l}");
    }
    lines.len()
}

/// `--tree` on a parent that sleeps while its children work: the verdict's
/// carriers are the children, and the CPU profile, the off-CPU profile
/// and the block I/O trace all hold their samples and only theirs.
#[test]
fn a_tree_is_drilled_into_the_members_that_work_not_the_sleeping_parent() {
    if !require_root("a_tree_is_drilled_into_the_members_that_work_not_the_sleeping_parent") {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("data");
    let mut f = std::fs::File::create(&file).unwrap();
    f.write_all(&vec![7u8; 8 << 20]).unwrap();
    f.sync_all().unwrap();
    let fam = family(&file);
    let parent = fam.parent.id().to_string();
    let v = common::diagnose_json(&["-d", "2", "--why", "all", "-p", &parent, "--tree"]);
    let d = &v["diagnosis"];
    let carriers: Vec<i64> = d["carriers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["pid"].as_i64().unwrap())
        .collect();
    let mut sorted = carriers.clone();
    sorted.sort();
    let mut kids = fam.kids.clone();
    kids.sort();
    assert_eq!(sorted, kids, "verdict {}: {d}", d["verdict"]);
    let why = &v["why"];
    assert!(why["skipped"].as_array().unwrap().is_empty(), "{why}");
    only_kids(why, "cpu_flame");
    only_kids(why, "offcpu_flame");
    assert!(why["cpu"]["samples"].as_u64().unwrap() > 0, "{why}");
    assert!(why["offcpu"]["total_ns"].as_u64().unwrap() > 0, "{why}");
    let storage = &why["storage"];
    assert!(storage["reads"].as_u64().unwrap() > 0, "{storage}");
    for s in storage["submitters"].as_array().unwrap() {
        if s["kernel"].is_null() {
            let pid = s["pid"].as_i64().unwrap();
            assert!(fam.kids.contains(&pid), "{pid} is not a child: {storage}");
        }
    }
    // The command to run next names a child (`sched`, when the machine is
    // busy, names `kdiag top`).
    let next = d["next"][0].as_str().unwrap();
    if d["verdict"] != "sched" {
        assert!(
            fam.kids.iter().any(|k| next.contains(&format!("-p {k} "))),
            "{next}"
        );
    }
}

/// A process of the test's own, killed (with what it started) at the end.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `cmd` and wait for it to print its first line.
fn started(cmd: &mut Command) -> Proc {
    let mut child = Proc(cmd.stdout(Stdio::piped()).spawn().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.0.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    child
}

/// The first runtime lock (not a condition) of the run, and its stack.
fn first_lock(v: &Value) -> (&Value, Vec<&str>) {
    let locks = v["observation"]["runtime_locks"].as_array().unwrap();
    let l = locks
        .iter()
        .find(|l| l["lock"] == true)
        .unwrap_or_else(|| panic!("no lock in {locks:?}"));
    let stack = l["stack"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    (l, stack)
}

/// The runtime lock the verdict names: asserted to be `kind` of `runtime`
/// taken in a function containing `function`, and `lock` the verdict.
fn assert_runtime_lock(v: &Value, runtime: &str, kind: &str, function: &str) -> f64 {
    let d = &v["diagnosis"];
    assert_eq!(d["verdict"], "lock", "{d}");
    runtime_lock_named(v, runtime, kind, function)
}

/// The runtime lock the report names, asserted as `assert_runtime_lock`
/// does but for the verdict; returns its share of the thread time.
fn runtime_lock_named(v: &Value, runtime: &str, kind: &str, function: &str) -> f64 {
    let d = &v["diagnosis"];
    let locks = v["observation"]["runtime_locks"].as_array().unwrap();
    let (l, stack) = first_lock(v);
    assert_eq!(
        (l["runtime"].as_str(), l["kind"].as_str()),
        (Some(runtime), Some(kind)),
        "{l}"
    );
    assert!(stack.iter().any(|f| f.contains(function)), "{stack:?}");
    let summary = &common::verdict_text(d);
    assert!(summary.contains(&format!("{runtime}: {kind}")), "{summary}");
    locks
        .iter()
        .filter(|k| k["kind"] == kind)
        .map(|k| k["share"].as_f64().unwrap())
        .sum()
}

/// Four CPU-bound Python threads take turns at the GIL: three wait for it
/// at any moment, in take_gil under a futex condition wait (never a
/// contended mutex). The verdict is `lock`, naming the GIL. In a cpu
/// cgroup of the test's own with the largest weight (`OwnCpu`) the threads
/// get their CPU on a busy machine: the test is about the lock, not the
/// competition. nice -15 alone did not do it across cgroups: beside
/// `stress-ng --cpu 1 --io 1` and other builds it read `sched` (44% of the
/// thread time waiting for a CPU).
#[test]
fn python_threads_competing_for_the_gil_are_a_lock() {
    if !require_root("python_threads_competing_for_the_gil_are_a_lock") {
        return;
    }
    let Some(python) = common::require_program(
        "python_threads_competing_for_the_gil_are_a_lock",
        &["python3"],
        "python3",
    ) else {
        return;
    };
    let script = "import threading, time\n\
        def spin():\n    x = 0\n    while True:\n        x += 1\n\
        for _ in range(4):\n    threading.Thread(target=spin, daemon=True).start()\n\
        print('ready', flush=True)\ntime.sleep(600)\n";
    let own = OwnCpu::new("gil");
    let p = started(command("nice").args(["-n", "-15", python, "-c", script]));
    if let Some(own) = &own {
        own.add(p.0.id());
    }
    let pid = p.0.id().to_string();
    let v = diagnose_beside(&own, &["-d", "2", "-p", &pid]);
    let share = assert_runtime_lock(&v, "CPython", "the GIL", "take_gil");
    // 3 of its 5 threads wait for the GIL at any moment (the main one
    // sleeps): 60%, less while a woken waiter waits for a CPU.
    assert!(
        share >= 0.3,
        "GIL share {share}: {}",
        v["observation"]["runtime_locks"]
    );
    // Its Python functions, hidden in the interpreter's loop, are read
    // from its memory: the GIL is taken back in `spin`.
    let (gil, _) = first_lock(&v);
    let caller = gil["caller"].as_str().unwrap_or_default();
    assert!(caller.starts_with("spin (<string>:"), "{gil}");
    assert_python_named(&v, "spin");
}

/// `kdiag diagnose --json ARGS` beside its target, in `own` at nice -15:
/// its stack sampler is not starved by the target's own spinning threads.
fn diagnose_beside(own: &Option<OwnCpu>, args: &[&str]) -> Value {
    use std::os::unix::process::CommandExt;
    let mut cmd = common::kdiag();
    cmd.args(["diagnose", "--json"])
        .args(args)
        .stdout(Stdio::piped());
    // SAFETY: setpriority is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(|| {
            libc::setpriority(libc::PRIO_PROCESS, 0, -15);
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    if let Some(own) = own {
        own.add(child.id());
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The drill-down read the target's Python stacks: `function` is the
/// innermost one most sampled (in `<string>`, from -c), with samples
/// enough to be named the hottest, and CPython's loop is no longer listed
/// as unnamed. Returns its label, `spin (<string>:2)`.
fn assert_python_named(v: &Value, function: &str) -> String {
    let p = &v["why"]["python"][0];
    assert_eq!(p["why_not"], Value::Null, "{p}");
    let f = &p["functions"][0];
    assert_eq!(
        (f["name"].as_str(), f["file"].as_str()),
        (Some(function), Some("<string>")),
        "{p}"
    );
    assert!(f["samples"].as_u64().unwrap() >= 10, "{p}");
    let u = v["why"]["unnamed"].as_array().expect("why.unnamed");
    assert!(u.iter().all(|u| u["runtime"] != "python"), "{u:?}");
    format!("{function} (<string>:{})", f["line"])
}

/// kdiag's offsets of CPython 3.11's structs are the ones its internal
/// headers give: tests/data/cpython311_offsets.c, built against them,
/// prints them as `Layout` prints itself.
#[test]
fn cpython_311_offsets_are_its_headers() {
    let test = "cpython_311_offsets_are_its_headers";
    let Some(cc) = common::require_program(test, &["cc"], "gcc") else {
        return;
    };
    let headers = "/usr/include/python3.11/internal/pycore_frame.h";
    if !std::path::Path::new(headers).exists() {
        assert!(
            !common::in_ci(),
            "{test}: needs python3.11-dev, and CI=true forbids skipping"
        );
        eprintln!("SKIPPED {test}: needs python3.11-dev");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("offsets");
    let built = Command::new(cc)
        .args(["-I/usr/include/python3.11", "-o"])
        .arg(&bin)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/cpython311_offsets.c"
        ))
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let out = Command::new(&bin).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("{:?}", kdiag::instruments::profile::python_stacks::PY311)
    );
}

/// A CPU-bound CPython 3.11 program without perf support (no -X perf):
/// diagnose names its Python function, as py-spy dump --nonblocking does
/// (both read its memory without stopping it).
#[test]
fn a_python_311_programs_function_is_named() {
    let test = "a_python_311_programs_function_is_named";
    if !require_root(test) {
        return;
    }
    let Some(python) = common::require_program(test, &["python3.11"], "python3.11") else {
        return;
    };
    let Some(py_spy) = common::require_program(test, &["py-spy"], "py-spy (pip)") else {
        return;
    };
    let script =
        "def spin():\n    while True: sum(range(1000))\nprint('ready', flush=True)\nspin()\n";
    let own = OwnCpu::new("py311");
    let p = started(command("nice").args(["-n", "-15", python, "-c", script]));
    if let Some(own) = &own {
        own.add(p.0.id());
    }
    let pid = p.0.id().to_string();
    let v = diagnose_beside(&own, &["-d", "2", "--why", "all", "-p", &pid]);
    let label = assert_python_named(&v, "spin");
    assert_eq!(label, "spin (<string>:2)");
    let truth = Command::new(py_spy)
        .args(["dump", "--nonblocking", "--pid", &pid])
        .output()
        .unwrap();
    let truth = String::from_utf8_lossy(&truth.stdout);
    assert!(truth.contains(&label), "py-spy: {truth}");
}

/// tests/programs/Contend.java running as PG_USER (its four threads
/// contending one monitor), its PID and that uid; None where the test
/// cannot run (said, and a failure under CI).
fn contending_jvm(test: &str) -> Option<(Proc, String, u32)> {
    if !require_root(test) {
        return None;
    }
    let java = common::require_program(test, &["java"], "openjdk-17-jdk-headless")?;
    let uid = user_id(test, PG_USER)?;
    use std::os::unix::process::CommandExt;
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/programs/Contend.java");
    let p = started(
        command(java)
            .arg(source)
            .current_dir("/tmp")
            .uid(uid)
            .gid(uid),
    );
    let pid = p.0.id().to_string();
    Some((p, pid, uid))
}

/// Four Java threads take turns at one `synchronized` method (the holder
/// sleeps 2 ms in it): the others are BLOCKED, parked in
/// ObjectMonitor::enter. The verdict is `lock`, naming the monitor; the
/// JVM's own idle threads (GC workers on semaphores, Object.wait) are not
/// counted as lock waits. The JVM runs as another user (PG_USER): kdiag
/// asks it for its perf map as that user, before the drill-down's stacks,
/// which then name the compiled Java method the monitor is taken in (as
/// jstack does: `Contend.work`); the map kdiag made is gone afterwards.
#[test]
fn a_contended_java_monitor_is_a_lock() {
    let test = "a_contended_java_monitor_is_a_lock";
    let Some((_jvm, pid, uid)) = contending_jvm(test) else {
        return;
    };
    let map = format!("/tmp/perf-{pid}.map");
    let v = common::diagnose_json(&["-d", "2", "-p", &pid]);
    let share = assert_runtime_lock(
        &v,
        "JVM",
        "a monitor (synchronized)",
        "ObjectMonitor::enter",
    );
    assert!(share > 0.0, "{share}");
    let asked = &v["why"]["perf_maps"];
    assert_eq!(asked[0]["pid"].as_i64(), pid.parse().ok(), "{asked}");
    assert_eq!(asked[0]["uid"].as_u64(), Some(uid as u64), "{asked}");
    assert!(asked[0]["why_not"].is_null(), "{asked}");
    assert!(asked[0]["entries"].as_u64().unwrap() > 0, "{asked}");
    let (l, stack) = first_lock(&v);
    assert_eq!(l["caller"], "Contend.work", "{l}");
    assert!(stack.contains(&"void Contend.work()"), "{stack:?}");
    let evidence = common::evidence_text(&v["diagnosis"]).join("\n");
    assert!(evidence.contains("taken in Contend.work"), "{evidence}");
    assert!(
        std::fs::symlink_metadata(&map).is_err(),
        "{map} outlived kdiag"
    );
}

/// The perf map kdiag made a JVM write goes with kdiag even when kdiag is
/// killed with SIGKILL during the drill-down that reads it: its janitor,
/// not kdiag's own exit, removes it (and the attach handshake's file).
#[test]
fn a_java_perf_map_kdiag_caused_goes_when_kdiag_is_killed() {
    let test = "a_java_perf_map_kdiag_caused_goes_when_kdiag_is_killed";
    let Some((_jvm, pid, _)) = contending_jvm(test) else {
        return;
    };
    let map = format!("/tmp/perf-{pid}.map");
    let mut kdiag = Proc(
        common::kdiag()
            .args(["diagnose", "--json", "-d", "1", "-p", &pid])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t = Instant::now();
    while std::fs::symlink_metadata(&map).is_err() {
        assert!(
            kdiag.0.try_wait().unwrap().is_none(),
            "kdiag ended before the JVM wrote {map}"
        );
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{map} never appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    kdiag.0.kill().unwrap();
    kdiag.0.wait().unwrap();
    let t = Instant::now();
    while std::fs::symlink_metadata(&map).is_ok() {
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "{map} outlived a SIGKILLed kdiag"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(std::fs::symlink_metadata(format!("/tmp/.attach_pid{pid}")).is_err());
}

/// The uid of `user`, which the test needs (.ci/run creates it).
fn user_id(test: &str, user: &str) -> Option<u32> {
    let out = command("id").args(["-u", user]).output().ok();
    let uid = out
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok());
    if uid.is_none() {
        assert!(
            !common::in_ci(),
            "{test}: needs the user {user} (.ci/run creates it)"
        );
        eprintln!("SKIPPED {test}: no user {user}");
    }
    uid
}

/// The newest PostgreSQL server programs' directory (Debian keeps them
/// out of PATH, under /usr/lib/postgresql/VERSION/bin).
fn postgres_bin(test: &str) -> Option<std::path::PathBuf> {
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("pg_ctl").exists())
        .max_by_key(|b| {
            let v = b.parent().unwrap().file_name().unwrap().to_string_lossy();
            v.parse::<u32>().unwrap_or(0)
        });
    if newest.is_none() {
        assert!(
            !common::in_ci(),
            "{test}: needs PostgreSQL (apt-get install postgresql), and CI=true forbids skipping"
        );
        eprintln!("SKIPPED {test}: PostgreSQL is not installed");
    }
    newest
}

/// The unprivileged user the cluster runs as (.ci/run creates it).
const PG_USER: &str = "kdiag-other";

/// A PostgreSQL cluster of the test's own in a temporary directory, run by
/// PG_USER, reached only through its own unix socket (no TCP port); stopped
/// (immediately) and removed on every way out of the test.
struct Cluster {
    bin: std::path::PathBuf,
    dir: tempfile::TempDir,
}

impl Cluster {
    fn start(bin: std::path::PathBuf) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("kdiag-pgtest-")
            .tempdir_in("/tmp")
            .unwrap();
        let chown = command("chown")
            .args([PG_USER, dir.path().to_str().unwrap()])
            .status()
            .unwrap();
        assert!(chown.success());
        let c = Cluster { bin, dir };
        let data = c.data();
        c.run(
            "initdb",
            &["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync"],
        );
        let opts = format!(
            "-k {} -c listen_addresses= -c fsync=off -c shared_buffers=16MB",
            c.socket_dir()
        );
        let log = format!("{}/log", c.socket_dir());
        c.run(
            "pg_ctl",
            &["-D", &data, "-o", &opts, "-l", &log, "-w", "start"],
        );
        c
    }

    fn socket_dir(&self) -> String {
        self.dir.path().to_str().unwrap().to_string()
    }

    fn data(&self) -> String {
        format!("{}/data", self.socket_dir())
    }

    /// `program` of the server's as PG_USER, which must succeed.
    fn run(&self, program: &str, args: &[&str]) -> String {
        let out = self.as_pg_user(program).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{program} {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// psql on the cluster, running `sql`, its output thrown away: a
    /// session to spawn.
    fn psql(&self, sql: &str) -> Command {
        let mut c = self.client(sql);
        c.stdout(Stdio::null()).stderr(Stdio::null());
        c
    }

    fn client(&self, sql: &str) -> Command {
        let mut c = self.as_pg_user("psql");
        c.args([
            "-h",
            &self.socket_dir(),
            "-U",
            "postgres",
            "-X",
            "-q",
            "-At",
        ])
        .args(["-c", sql]);
        c
    }

    /// The server's `program`, run as PG_USER (from a directory they may
    /// enter).
    fn as_pg_user(&self, program: &str) -> Command {
        let mut c = command("runuser");
        c.args(["-u", PG_USER, "--"])
            .arg(self.bin.join(program))
            .current_dir("/tmp");
        c
    }

    /// `sql`'s output (unaligned, tuples only); it must succeed.
    fn query(&self, sql: &str) -> String {
        let out = self.client(sql).output().unwrap();
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn postmaster(&self) -> String {
        let pid = std::fs::read_to_string(format!("{}/postmaster.pid", self.data())).unwrap();
        pid.lines().next().unwrap().to_string()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // The clients' backends end with the server.
        let _ = self
            .as_pg_user("pg_ctl")
            .args(["-D", &self.data(), "-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Two sessions wait on the row a third holds locked in an open
/// transaction: their backends sleep in ProcSleep → WaitLatch, which
/// waits in epoll_wait (a futex is nowhere), "sleeping by design" by the
/// call alone. The stacks read from /proc name the lock: the waiting
/// backend's verdict is `lock`, a PostgreSQL heavyweight lock; `--tree`
/// on the postmaster says the same.
#[test]
fn postgresql_backends_waiting_on_a_row_lock_are_a_lock() {
    let test = "postgresql_backends_waiting_on_a_row_lock_are_a_lock";
    if !require_root(test) {
        return;
    }
    let Some(bin) = postgres_bin(test) else {
        return;
    };
    if user_id(test, PG_USER).is_none() {
        return;
    }
    let pg = Cluster::start(bin);
    pg.query("CREATE TABLE t (id int PRIMARY KEY, n int); INSERT INTO t VALUES (1, 0);");
    let _holder = Proc(
        pg.psql("BEGIN; UPDATE t SET n = n + 1 WHERE id = 1; SELECT pg_sleep(600);")
            .spawn()
            .unwrap(),
    );
    // The holder's update first, then the waiters'.
    let t = Instant::now();
    while pg.query("SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' AND granted")
        == "0\n"
    {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the holder took no lock"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _waiters: Vec<Proc> = (0..2)
        .map(|_| {
            Proc(
                pg.psql("UPDATE t SET n = n + 1 WHERE id = 1;")
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    let waiting =
        || pg.query("SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' ORDER BY pid");
    let t = Instant::now();
    while waiting().lines().count() < 2 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no session waits: {}",
            waiting()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let backend = waiting().lines().next().unwrap().to_string();
    let v = common::diagnose_json(&["-d", "2", "-p", &backend]);
    let share = assert_runtime_lock(
        &v,
        "PostgreSQL",
        "a heavyweight lock (row or table)",
        "ProcSleep",
    );
    // It waits all the time (one thread, asleep in the lock).
    assert!(
        share >= 0.8,
        "{share}: {}",
        v["observation"]["runtime_locks"]
    );
    let (l, _) = first_lock(&v);
    assert_eq!(l["call"], "epoll_wait", "{l}");

    // The whole server: two of its processes wait, the rest sleep.
    let v = common::diagnose_json(&["-d", "2", "-p", &pg.postmaster(), "--tree"]);
    assert_runtime_lock(
        &v,
        "PostgreSQL",
        "a heavyweight lock (row or table)",
        "ProcSleep",
    );
}

/// Eight goroutines take turns at one sync.Mutex, computing while they
/// hold it (tests/programs/contend_mutex.go, built by the test). A
/// goroutine that waits parks, and the thread that ran it sleeps in the
/// scheduler's futex: the stacks read from /proc stop where Go switches to
/// the scheduler's stack, the off-CPU profile's frame-pointer stacks go on
/// to the goroutine's sync.(*Mutex).lockSlow. The verdict is `lock`, a
/// Go sync.Mutex, taken in main.worker. In a cpu cgroup of its own
/// (`OwnCpu`), as the GIL test, so the holder gets its CPU.
#[test]
fn go_goroutines_contending_a_mutex_are_a_lock() {
    let test = "go_goroutines_contending_a_mutex_are_a_lock";
    if !require_root(test) {
        return;
    }
    let Some(go) = common::require_program(test, &["go"], "golang-go") else {
        return;
    };
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bin = dir.path().join("contend_mutex");
    let source = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/programs/contend_mutex.go"
    );
    let out = command(go)
        .args(["build", "-o"])
        .arg(&bin)
        .arg(source)
        .env("GOCACHE", dir.path().join("cache"))
        .env("GOPATH", dir.path().join("gopath"))
        .env("GOFLAGS", "")
        .env("GO111MODULE", "off")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "go build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let own = OwnCpu::new("gomutex");
    // More Ps than CPUs, as a Go server on a small container has: the
    // parked goroutines' threads then sleep in the scheduler while one
    // computes (with GOMAXPROCS = 2 CPUs, one computes and one waits,
    // and the verdict is a tie between cpu and lock).
    let p = started(command(&bin).env("GOMAXPROCS", "8"));
    if let Some(own) = &own {
        own.add(p.0.id());
    }
    let pid = p.0.id().to_string();
    let v = common::diagnose_json(&["-d", "2", "-p", &pid]);
    // Go parks a waiting goroutine, not its thread: the lock shows as the
    // scheduler's idle threads, which Go keeps few. So lock is the verdict
    // or, when the holder's computing edges ahead, the cause's runner-up
    // with a large share; never `idle` or "sleeping by design".
    let share = runtime_lock_named(&v, "Go", "a sync.Mutex", "sync.(*Mutex).lockSlow");
    assert!(
        share > 0.2,
        "{share}: {}",
        v["observation"]["runtime_locks"]
    );
    let d = &v["diagnosis"];
    let runner_up = d["cause"]["also"].as_array().and_then(|a| {
        a.iter()
            .find(|x| x["state"] == "lock")
            .and_then(|x| x["share"].as_f64())
    });
    assert!(
        d["verdict"] == "lock" || runner_up.is_some_and(|s| s >= 0.4),
        "{d}"
    );
    let (l, stack) = first_lock(&v);
    assert_eq!(l["caller"], "main.worker", "{l}");
    assert!(
        stack.iter().any(|f| f.starts_with("runtime.semacquire")),
        "{stack:?}"
    );
    assert!(
        stack.iter().any(|f| f.starts_with("runtime.futex")),
        "{stack:?}"
    );
}
