//! `kdiag offcpu` really tracing (root): threads contending on a lock (this
//! test binary, re-run as a helper, measures its own waits), an O_SYNC
//! writer reaching the block layer, the /proc fallback, and no BPF program
//! left behind after a normal exit, SIGINT or SIGKILL.

mod common;
use common::profile_files::{Pprof, speedscope_schema, validate};
use common::*;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Tests count kdiag's BPF programs on the machine: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const LOCKERS: usize = 4;
const ROUNDS: usize = 30;
const HOLD: Duration = Duration::from_millis(5);

/// Take the lock: where the lockers block. Never inlined, so it is a frame.
#[inline(never)]
fn wait_for_lock(m: &Mutex<u64>) -> std::sync::MutexGuard<'_, u64> {
    m.lock().unwrap()
}

/// The helper program: started by the tests as this test binary with
/// `--exact lock_helper --ignored` and KDIAG_OFFCPU_HELPER=OUT. It waits
/// for a line on stdin, then LOCKERS threads (all named "locker") take one
/// mutex in turn and hold it while sleeping; it writes the total time they
/// spent waiting for the lock, in ns, to OUT.
#[test]
#[ignore = "helper process for the other tests"]
fn lock_helper() {
    let Some(out) = std::env::var_os("KDIAG_OFFCPU_HELPER") else {
        return;
    };
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    let lock = Mutex::new(0u64);
    let waited: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..LOCKERS)
            .map(|_| {
                let lock = &lock;
                std::thread::Builder::new()
                    .name("locker".into())
                    .spawn_scoped(s, move || {
                        let mut waited = Duration::ZERO;
                        for _ in 0..ROUNDS {
                            let t = Instant::now();
                            let mut g = wait_for_lock(lock);
                            waited += t.elapsed();
                            *g += 1;
                            std::thread::sleep(HOLD);
                            drop(g);
                            // Let another locker in before taking it again.
                            std::thread::yield_now();
                        }
                        waited.as_nanos() as u64
                    })
                    .unwrap()
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    std::fs::write(out, waited.to_string()).unwrap();
}

/// The helper, started and waiting for its go.
struct Helper {
    child: Child,
    out: PathBuf,
}

impl Helper {
    fn start(name: &str) -> Helper {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join(format!("offcpu-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&out);
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "lock_helper", "--ignored", "--test-threads=1"])
            .env("KDIAG_OFFCPU_HELPER", &out)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        Helper { child, out }
    }

    fn go(&mut self) {
        writeln!(self.child.stdin.as_mut().unwrap(), "go").unwrap();
    }

    /// Wait for it to end; the waiting time it measured, in ns.
    fn measured(mut self) -> u64 {
        assert!(self.child.wait().unwrap().success(), "helper failed");
        let text = std::fs::read_to_string(&self.out).unwrap();
        let _ = std::fs::remove_file(&self.out);
        text.trim().parse().unwrap()
    }
}

/// kdiag offcpu started in the background, ready once it says it traces.
struct Kdiag {
    child: Child,
    stdout: std::sync::mpsc::Receiver<String>,
    stderr: std::sync::mpsc::Receiver<String>,
}

impl Kdiag {
    fn start(args: &[&str]) -> Kdiag {
        let mut child = kdiag()
            .arg("offcpu")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            if err.read_line(&mut line).unwrap() == 0 {
                let mut out = String::new();
                child
                    .stdout
                    .take()
                    .unwrap()
                    .read_to_string(&mut out)
                    .unwrap();
                panic!("kdiag offcpu {args:?} ended before tracing:\n{seen}{out}");
            }
            seen += &line;
            if line.starts_with("Tracing off-CPU time") {
                break;
            }
        }
        let reader = |mut r: Box<dyn Read + Send>, prefix: String| {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let mut s = prefix;
                let _ = r.read_to_string(&mut s);
                let _ = tx.send(s);
            });
            rx
        };
        let stdout = reader(Box::new(child.stdout.take().unwrap()), String::new());
        let stderr = reader(Box::new(err), seen);
        Kdiag {
            child,
            stdout,
            stderr,
        }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Wait for kdiag to end by itself: (exit code, stdout, stderr).
    fn wait(mut self) -> (Option<i32>, String, String) {
        let status = self.child.wait().unwrap();
        (
            status.code(),
            self.stdout.recv().unwrap(),
            self.stderr.recv().unwrap(),
        )
    }

    fn signal(&self, sig: i32) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid(), sig) };
    }
}

fn json(stdout: &str, stderr: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}

fn frames(stack: &Value) -> Vec<&str> {
    stack["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect()
}

/// Blocked ns of the stacks having a frame ending in `name`.
fn blocked_under(report: &Value, name: &str) -> u64 {
    report["offcpu"]["profile"]["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| frames(s).iter().any(|f| f.ends_with(name)))
        .map(|s| s["weight"].as_u64().unwrap())
        .sum()
}

#[test]
fn lock_waits_show_the_locking_function_with_the_time_it_measured() {
    if !require_root("lock_waits_show_the_locking_function_with_the_time_it_measured") {
        return;
    }
    let _serial = serial();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let folded = dir.join(format!("offcpu-lock-{}.folded", std::process::id()));
    let svg = dir.join(format!("offcpu-lock-{}.svg", std::process::id()));
    let pprof = dir.join(format!("offcpu-lock-{}.pb.gz", std::process::id()));
    let speedscope = dir.join(format!("offcpu-lock-{}.json", std::process::id()));
    let mut helper = Helper::start("lock");
    let pid = helper.child.id().to_string();
    let tracer = Kdiag::start(&[
        "-p",
        &pid,
        "--json",
        "--folded",
        folded.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
        "--pprof",
        pprof.to_str().unwrap(),
        "--speedscope",
        speedscope.to_str().unwrap(),
    ]);
    helper.go();
    // kdiag ends by itself when the helper exits.
    let (code, out, err) = tracer.wait();
    let measured = helper.measured();
    assert_eq!(code, Some(0), "{err}");
    let report = json(&out, &err);
    assert_eq!(report["offcpu"]["collection"]["kind"], "bpf", "{err}");

    // On top: the lockers' wait for the lock, in S (a futex wait).
    let top = &report["summary"]["paths"][0];
    assert_eq!(top["comms"][0], "locker", "{}", report["summary"]);
    assert_eq!(top["state"], "S");
    let top_frames: Vec<&str> = top["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        top_frames.iter().any(|f| f.ends_with("wait_for_lock")),
        "{top_frames:?}"
    );
    assert!(
        top_frames.iter().any(|f| f.starts_with("futex")),
        "{top_frames:?}"
    );
    assert_eq!(top_frames.last(), Some(&"__schedule_[k]"));

    // The blocked time under wait_for_lock is what the lockers measured.
    let traced = blocked_under(&report, "wait_for_lock");
    let ratio = traced as f64 / measured as f64;
    eprintln!("blocked under wait_for_lock: kdiag {traced} ns, lockers measured {measured} ns");
    assert!(
        (0.9..=1.1).contains(&ratio),
        "kdiag saw {traced} ns blocked under wait_for_lock, the lockers measured {measured} ns \
         ({ratio:.3})"
    );
    // The sleep while holding the lock is a path of its own.
    assert!(
        blocked_under(&report, "nanosleep") > 0,
        "{}",
        report["summary"]
    );

    // Folded stacks and flame graph: microseconds, rooted at the thread name.
    let text = std::fs::read_to_string(&folded).unwrap();
    let us: u64 = text
        .lines()
        .filter(|l| l.starts_with("locker;") && l.contains("wait_for_lock"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(
        (us as f64 / (traced as f64 / 1000.0) - 1.0).abs() < 0.01,
        "{us} us folded, {traced} ns traced"
    );
    assert!(text.contains("schedule_[k];__schedule_[k] "), "{text}");
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(picture.contains("Off-CPU time of PID"), "svg title");
    assert!(picture.contains(" us, "), "svg counts in us");

    // pprof and speedscope: blocked nanoseconds as the value, the same
    // time under wait_for_lock as the report.
    let p = Pprof::read(&pprof);
    assert_eq!(
        p.sample_types,
        [
            ("blocks".into(), "count".into()),
            ("off-cpu".into(), "nanoseconds".into())
        ]
    );
    let in_pprof: u64 = p
        .samples
        .iter()
        .filter(|(locs, _, _)| {
            locs.iter()
                .any(|l| p.functions[&p.locations[l].1].ends_with("wait_for_lock"))
        })
        .map(|(_, values, _)| values[1])
        .sum();
    assert_eq!(in_pprof, traced, "pprof's off-CPU ns under wait_for_lock");
    let doc: Value = serde_json::from_slice(&std::fs::read(&speedscope).unwrap()).unwrap();
    let schema = speedscope_schema();
    validate(&schema, &schema, &doc, "$").unwrap();
    assert_eq!(doc["profiles"][0]["unit"], "nanoseconds");
    for f in [folded, svg, pprof, speedscope] {
        let _ = std::fs::remove_file(f);
    }
}

#[test]
fn osync_writer_waits_in_the_block_layer_in_state_d() {
    if !require_root("osync_writer_waits_in_the_block_layer_in_state_d") {
        return;
    }
    let _serial = serial();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("offcpu-osync-{}", std::process::id()));
    let of = format!("of={}", file.display());
    let out = run_kdiag(&[
        "offcpu",
        "--json",
        "--",
        "dd",
        "if=/dev/zero",
        &of,
        "bs=64k",
        "count=100",
        "oflag=sync",
    ]);
    let _ = std::fs::remove_file(&file);
    let (stdout, stderr) = (common::stdout(&out), common::stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report = json(&stdout, &stderr);
    let stacks = report["offcpu"]["profile"]["stacks"].as_array().unwrap();
    let block_layer = |f: &&str| f.starts_with("io_schedule") || f.starts_with("blk_");
    let d_writes: Vec<&Value> = stacks
        .iter()
        .filter(|s| s["comm"] == "dd" && s["state"] == "D")
        .filter(|s| frames(s).contains(&"vfs_write") && frames(s).iter().any(block_layer))
        .collect();
    assert!(
        !d_writes.is_empty(),
        "no D-state write stack reaching the block layer:\n{}",
        report["summary"]
    );
    // Kernel frames are marked as such, below the write system call.
    let s = d_writes[0];
    let all = s["frames"].as_array().unwrap();
    let write = all.iter().position(|f| f["name"] == "vfs_write").unwrap();
    assert!(all[write..].iter().all(|f| f["kernel"] == true), "{s}");
    let d = report["summary"]["by_state"]
        .as_array()
        .unwrap()
        .iter()
        .find(|st| st["state"] == "D")
        .expect("D state in the summary");
    assert!(d["ns"].as_u64().unwrap() > 0);
}

#[test]
fn proc_tier_shows_wait_channels_and_syscalls_without_stacks() {
    if !require_root("proc_tier_shows_wait_channels_and_syscalls_without_stacks") {
        return;
    }
    let _serial = serial();
    let mut helper = Helper::start("proc");
    let pid = helper.child.id().to_string();
    let tracer = Kdiag::start(&["-p", &pid, "--tier", "proc", "--json"]);
    helper.go();
    let (code, out, err) = tracer.wait();
    helper.measured();
    assert_eq!(code, Some(0), "{err}");
    let report = json(&out, &err);
    assert_eq!(report["offcpu"]["collection"]["kind"], "proc");
    assert!(
        report["offcpu"]["profile"]["stacks"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let rows = report["offcpu"]["waits"]["rows"].as_array().unwrap();
    assert!(
        rows.iter()
            .any(|r| r["comm"] == "locker" && r["state"] == "S" && r["syscall"] == "futex"),
        "{rows:?}"
    );
    assert!(
        rows.iter()
            .any(|r| r["comm"] == "locker" && r["syscall"] == "clock_nanosleep"),
        "{rows:?}"
    );
}

/// The /proc tier's summary is what its samples measured: two half-second
/// sleeps are about a second asleep in nanosleep, not nothing.
#[test]
fn proc_tier_summary_counts_the_time_its_samples_saw() {
    let out = run_kdiag(&[
        "offcpu",
        "--tier",
        "proc",
        "--json",
        "--",
        "sh",
        "-c",
        "sleep 0.5; sleep 0.5",
    ]);
    let (stdout, stderr) = (common::stdout(&out), common::stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report = json(&stdout, &stderr);
    assert_eq!(report["offcpu"]["collection"]["kind"], "proc");
    let summary = &report["summary"];
    let rows: u64 = report["offcpu"]["waits"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["est_ns"].as_u64().unwrap())
        .sum();
    assert_eq!(summary["total_ns"].as_u64(), Some(rows), "{summary}");
    // The sleeps' wait points: wchan (hrtimer_nanosleep), or the system
    // call where a sweep read no wait channel.
    let asleep: u64 = summary["wait_points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["function"].as_str().unwrap().contains("nanosleep") && w["state"] == "S")
        .map(|w| w["ns"].as_u64().unwrap())
        .sum();
    assert!(
        (800_000_000..=1_500_000_000).contains(&asleep),
        "{asleep} ns asleep: {summary}"
    );
    assert!(summary["paths"].as_array().unwrap().is_empty());
}

/// The programs kdiag `k` holds once it traces: at least the off-CPU ones.
fn tracing_programs(k: &Kdiag) -> BTreeSet<u64> {
    let ids = bpf_programs::held_by(k.pid() as u32);
    assert!(!ids.is_empty(), "no BPF program while tracing");
    ids
}

#[test]
fn no_bpf_program_outlives_kdiag() {
    if !require_root("no_bpf_program_outlives_kdiag") {
        return;
    }
    let _serial = serial();

    // A normal end: -d.
    // Long enough to read its descriptors however loaded the machine is.
    let k = Kdiag::start(&["-a", "-d", "2"]);
    let ids = tracing_programs(&k);
    let (code, out, err) = k.wait();
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("Top blocking paths"), "{out}");
    bpf_programs::wait_until_gone(&ids, "exit after -d");

    // Ctrl-C: the report is still printed.
    let k = Kdiag::start(&["-a"]);
    let ids = tracing_programs(&k);
    std::thread::sleep(Duration::from_millis(300));
    k.signal(libc::SIGINT);
    let (code, out, err) = k.wait();
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("Off-CPU time of every process"), "{out}");
    bpf_programs::wait_until_gone(&ids, "SIGINT");

    // SIGKILL: the kernel closes the fds, and that detaches everything.
    let k = Kdiag::start(&["-p", "1"]);
    let ids = tracing_programs(&k);
    k.signal(libc::SIGKILL);
    let (code, _, _) = k.wait();
    assert_eq!(code, None, "killed by a signal");
    bpf_programs::wait_until_gone(&ids, "SIGKILL");
}

#[test]
fn usage_and_missing_target_errors() {
    let out = run_kdiag(&["offcpu"]);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    assert!(common::stderr(&out).contains("say what to trace"));
    let out = run_kdiag(&["offcpu", "-a", "-p", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run_kdiag(&["offcpu", "-a", "-d", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run_kdiag(&["offcpu", "-a", "--state", "x"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run_kdiag(&["offcpu", "-a", "--tier", "proc", "--svg", "x.svg"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(common::stderr(&out).contains("need stacks"));
    let gone = common::free_pid();
    let out = run_kdiag(&["offcpu", "-p", &gone]);
    assert_eq!(out.status.code(), Some(2));
    assert!(common::stderr(&out).contains(&format!("no process with PID {gone}")));
}

/// kdiag run as user nobody (65534).
fn as_nobody(args: &[&str]) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    // SAFETY: setgid/setuid are async-signal-safe.
    unsafe {
        kdiag()
            .args(args)
            .pre_exec(|| {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(65534) != 0
                    || libc::setuid(65534) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
            .output()
            .unwrap()
    }
}

#[test]
fn without_privileges_bpf_is_refused_and_auto_falls_back_to_proc() {
    if !require_root("without_privileges_bpf_is_refused_and_auto_falls_back_to_proc") {
        return;
    }
    let _serial = serial();
    // A process nobody may inspect: its own kind, asleep.
    let mut sleeper = {
        use std::os::unix::process::CommandExt;
        Kids(vec![
            Command::new("sleep")
                .arg("30")
                .uid(65534)
                .gid(65534)
                .spawn()
                .unwrap(),
        ])
    };
    let pid = sleeper.0[0].id().to_string();

    let out = as_nobody(&["offcpu", "--tier", "bpf", "-p", &pid, "-d", "0.3"]);
    assert_eq!(out.status.code(), Some(3), "{}", common::stderr(&out));
    assert!(
        common::stderr(&out).contains("sudo"),
        "{}",
        common::stderr(&out)
    );
    let out = as_nobody(&["offcpu", "--svg", "x.svg", "-p", &pid, "-d", "0.3"]);
    assert_eq!(out.status.code(), Some(3), "{}", common::stderr(&out));

    let out = as_nobody(&["offcpu", "-p", &pid, "-d", "0.3", "--json"]);
    let (stdout, stderr) = (common::stdout(&out), common::stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("No BPF"), "{stderr}");
    let report = json(&stdout, &stderr);
    assert_eq!(report["offcpu"]["collection"]["kind"], "proc");
    assert!(
        report["offcpu"]["fallback_reason"]
            .as_str()
            .unwrap()
            .contains("sudo")
    );
    let rows = report["offcpu"]["waits"]["rows"].as_array().unwrap();
    assert!(
        rows.iter()
            .any(|r| r["comm"] == "sleep" && r["syscall"] == "clock_nanosleep"),
        "{rows:?}"
    );
    sleeper.0[0].kill().unwrap();
}

/// A process asleep the whole window (`sleep 60`, asleep before tracing
/// began and after it ended): its block is counted, a window long, not
/// "0 blocks" (its start was never seen; its stack is unknown and says so).
#[test]
fn a_thread_asleep_the_whole_window_counts_the_window() {
    if !require_root("a_thread_asleep_the_whole_window_counts_the_window") {
        return;
    }
    let _serial = serial();
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = sleeper.id().to_string();
    // Asleep before kdiag starts.
    let stat = format!("/proc/{pid}/stat");
    let asleep = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        std::fs::read_to_string(&stat).is_ok_and(|s| s.contains(") S "))
    });
    assert!(asleep, "sleep never slept");
    let out = run_kdiag(&["offcpu", "-p", &pid, "-d", "1", "--json"]);
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let (stdout, stderr) = (common::stdout(&out), common::stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report = json(&stdout, &stderr);
    let summary = &report["summary"];
    let total = summary["total_ns"].as_u64().unwrap();
    assert!(
        summary["blocks"].as_u64() == Some(1) && (900_000_000..1_300_000_000).contains(&total),
        "{summary}"
    );
    let asleep = blocked_under(&report, "[asleep since before tracing began]");
    assert_eq!(asleep, total, "{summary}");
}
