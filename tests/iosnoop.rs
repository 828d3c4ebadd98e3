//! `kdiag iosnoop` really tracing (root): this test process does O_DIRECT and
//! O_SYNC I/O on the root disk while kdiag traces, and kdiag must report
//! exactly those requests, attributed to this process, on both tiers.

mod common;
use common::*;

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

/// Tests share this process's PID and the disk: run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// A request size nothing else on the machine is likely to use.
const SIZE: usize = 96 * 1024;

/// An aligned buffer for O_DIRECT.
struct Aligned {
    ptr: *mut u8,
    layout: Layout,
}

impl Aligned {
    fn new(size: usize) -> Aligned {
        let layout = Layout::from_size_align(size, 4096).unwrap();
        // SAFETY: non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Aligned { ptr, layout }
    }

    fn slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr holds layout.size() initialised bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// A scratch file on the root disk (target/tmp is on ext4 here, not tmpfs),
/// written out and synced so later O_DIRECT writes only overwrite data.
fn scratch(name: &str, len: usize) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("iosnoop-{name}-{}", std::process::id()));
    let mut f = File::create(&path).unwrap();
    f.write_all(&vec![0x5a; len]).unwrap();
    f.sync_all().unwrap();
    // SAFETY: a zeroed statfs is a valid out-parameter.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: valid path and out-pointer.
    assert_eq!(unsafe { libc::statfs(c.as_ptr(), &mut st) }, 0);
    assert_ne!(
        st.f_type,
        libc::TMPFS_MAGIC,
        "{} is on tmpfs: no block I/O to trace",
        dir.display()
    );
    path
}

/// How many extents the file has on disk (filefrag, from e2fsprogs).
fn extents(path: &Path) -> usize {
    let out = Command::new("filefrag")
        .arg(path)
        .output()
        .expect("filefrag runs");
    let text = String::from_utf8_lossy(&out.stdout);
    // "PATH: 3 extents found" / "PATH: 1 extent found"
    text.rsplit(": ")
        .next()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("unexpected filefrag output: {text}"))
}

fn direct_writes_then_reads(path: &Path, n: usize) {
    let mut buf = Aligned::new(SIZE);
    buf.slice().fill(0xa5);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .unwrap();
    for i in 0..n {
        f.write_all_at(buf.slice(), (i * SIZE) as u64).unwrap();
    }
    for i in 0..n {
        f.read_exact_at(buf.slice(), (i * SIZE) as u64).unwrap();
    }
}

/// kdiag iosnoop running in the background, started and ready.
/// Keeps every CPU busy (at the lowest priority) while it lives.
///
/// On Linux 6.18 (seen in a VM) a tracepoint sample taken in the completion
/// interrupt while that CPU is idle is counted but never delivered to perf
/// rings: perf record loses it too. The perf-tier tests keep the CPUs out of
/// idle so they can check exact matching; `perf_tier_accounts_for_every_completion`
/// checks that kdiag reports the shortfall when the CPUs do idle.
struct BusyCpus(#[allow(dead_code)] Kids);

impl BusyCpus {
    fn for_tier(tier: &str) -> BusyCpus {
        if tier != "perf" {
            return BusyCpus(Kids(Vec::new()));
        }
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        BusyCpus(Kids(
            (0..cpus)
                .map(|_| {
                    Command::new("nice")
                        .args(["-n", "19", "sh", "-c", "while :; do :; done"])
                        .spawn()
                        .unwrap()
                })
                .collect(),
        ))
    }
}

/// Runs a perf-tier check up to three times while kdiag reports that the
/// kernel counted completions it never delivered (see `BusyCpus`: keeping
/// the CPUs busy makes that rare, not impossible). `check` returns false to
/// ask for another run; on the last run it must assert regardless. Any other
/// failure fails at once: only the quirk kdiag itself names is retried.
fn with_quirk_retries(check: impl Fn(bool) -> bool) {
    const RUNS: usize = 3;
    for run in 1..=RUNS {
        if check(run == RUNS) {
            return;
        }
        eprintln!("run {run}: the kernel did not deliver every completion; running again");
    }
}

/// Whether kdiag reported completions the kernel counted but did not deliver.
fn undelivered(err: &str) -> bool {
    err.contains("completions but delivered only")
}

struct Tracer {
    child: Child,
    stderr: mpsc::Receiver<String>,
    reader: std::thread::JoinHandle<()>,
}

impl Tracer {
    fn start(args: &[&str]) -> Tracer {
        let mut child = kdiag()
            .arg("iosnoop")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut seen = Vec::new();
        loop {
            match rx.recv_timeout(Duration::from_secs(20)) {
                Ok(line) if line.starts_with("Tracing block I/O") => break,
                Ok(line) => seen.push(line),
                Err(_) => panic!("kdiag iosnoop did not start: {}", seen.join("\n")),
            }
        }
        Tracer {
            child,
            stderr: rx,
            reader,
        }
    }

    /// Ctrl-C, then the JSON report and stderr.
    fn stop(mut self) -> (Value, String) {
        // Let the last completions reach the ring before stopping.
        std::thread::sleep(Duration::from_millis(300));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let status = self.child.wait().unwrap();
        self.reader.join().unwrap();
        let err: Vec<String> = self.stderr.try_iter().collect();
        let err = err.join("\n");
        assert!(status.success(), "kdiag failed: {status}\n{err}");
        let json =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("bad JSON ({e}): {out}\n{err}"));
        (json, err)
    }
}

fn requests(report: &Value) -> &Vec<Value> {
    report["requests"].as_array().expect("requests array")
}

fn is_op(r: &Value, op: char) -> bool {
    // The operation is the first letter, after an optional preflush F.
    let t = r["rwbs"].as_str().unwrap();
    let t = if t.len() > 1 {
        t.trim_start_matches('F')
    } else {
        t
    };
    t.starts_with(op)
}

fn exact_requests_attributed(tier: &str, last: bool) -> bool {
    let test = format!("exact_requests_attributed_{tier}");
    if !require_root(&test) {
        return true;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _busy = BusyCpus::for_tier(tier);
    const N: usize = 40;
    let path = scratch(tier, N * SIZE);
    // Each boundary between the file's extents on disk can split one I/O
    // into two requests: the kernel then really issues up to that many more.
    let splits = extents(&path) - 1;
    let me = std::process::id();
    let tracer = Tracer::start(&["--json", "--tier", tier, "-p", &me.to_string()]);
    direct_writes_then_reads(&path, N);
    let (report, err) = tracer.stop();
    std::fs::remove_file(&path).unwrap();
    if !last && undelivered(&err) {
        return false;
    }
    assert_eq!(report["tier"], tier, "{err}");
    assert_eq!(report["lost_events"], 0, "{err}");
    let mine: Vec<&Value> = requests(&report)
        .iter()
        .filter(|r| r["pid"] == me)
        .collect();
    let show = || serde_json::to_string_pretty(&mine).unwrap();
    let mut counts = Vec::new();
    for op in ['W', 'R'] {
        let of_op: Vec<&&Value> = mine.iter().filter(|r| is_op(r, op)).collect();
        let bytes: u64 = of_op.iter().map(|r| r["bytes"].as_u64().unwrap()).sum();
        let whole = of_op.iter().filter(|r| r["bytes"] == SIZE).count();
        assert_eq!(
            bytes,
            (N * SIZE) as u64,
            "{op} bytes charged to {me}:\n{}",
            show()
        );
        assert!(
            (N..=N + splits).contains(&of_op.len()) && whole + splits >= N,
            "{} {op} requests ({whole} of {SIZE} bytes) charged to {me}, expected {N} \
             (+ at most {splits} split at extent boundaries):\n{}",
            of_op.len(),
            show()
        );
        for r in &of_op {
            assert!(r["bytes"].as_u64().unwrap() <= SIZE as u64, "{r}");
            assert_eq!(r["disk"], "vda", "{r}");
            assert!(r["latency_ns"].as_u64().unwrap() > 0, "{r}");
        }
        counts.push(of_op.len() as u64);
    }
    // Nothing else was pinned on us.
    assert_eq!(mine.len() as u64, counts[0] + counts[1], "{}", show());
    // The per-process summary agrees.
    let procs = report["processes"].as_array().unwrap();
    let p = procs.iter().find(|p| p["pid"] == me).expect("summary row");
    assert_eq!(
        (p["writes"].as_u64(), p["reads"].as_u64()),
        (Some(counts[0]), Some(counts[1]))
    );
    assert!(p["p99_ms"].as_f64().unwrap() > 0.0);
    assert!(
        err.contains(&format!(
            "with the {} tier; 0 events lost",
            if tier == "bpf" { "BPF" } else { "perf" }
        )),
        "{err}"
    );
    true
}

#[test]
fn exact_requests_attributed_bpf() {
    // Rarely (about 1 run in 40 under heavy load from other sessions on the
    // development VM) the kernel skips the tp_btf completion program for a
    // completion softirq that runs over one particular thread of the VM's
    // agent, and counts no miss; the kernel's own trace shows the request
    // complete. Not ours to fix: try again once, and fail if it repeats.
    let first = std::panic::catch_unwind(|| exact_requests_attributed("bpf", true));
    if let Err(e) = first {
        let msg = e
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| e.downcast_ref::<&str>().copied())
            .unwrap_or("?");
        eprintln!("first attempt failed, retrying once: {msg}");
        exact_requests_attributed("bpf", true);
    }
}

#[test]
fn exact_requests_attributed_perf() {
    with_quirk_retries(|last| exact_requests_attributed("perf", last));
}

/// Buffered O_SYNC writes reach the disk from the writer's own fsync path:
/// they must be charged to the writer, not to a kworker or flusher.
fn osync_writes_attributed_to_writer(tier: &str, last: bool) -> bool {
    let test = format!("osync_writes_attributed_to_writer_{tier}");
    if !require_root(&test) {
        return true;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _busy = BusyCpus::for_tier(tier);
    const N: usize = 16;
    let path = scratch(&format!("osync-{tier}"), N * SIZE);
    let me = std::process::id();
    let tracer = Tracer::start(&["--json", "--tier", tier, "--device", "vda"]);
    let mut f = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_SYNC)
        .open(&path)
        .unwrap();
    for _ in 0..N {
        f.write_all(&[0x3c; SIZE]).unwrap();
    }
    drop(f);
    let (report, err) = tracer.stop();
    std::fs::remove_file(&path).unwrap();
    if !last && undelivered(&err) {
        return false;
    }
    let mine_bytes: u64 = requests(&report)
        .iter()
        .filter(|r| r["pid"] == me && is_op(r, 'W'))
        .map(|r| r["bytes"].as_u64().unwrap())
        .sum();
    assert!(
        mine_bytes >= (N * SIZE) as u64,
        "only {mine_bytes} bytes of writes charged to the writer {me} ({} written)\n{err}",
        N * SIZE
    );
    // Each write was synchronous: our data requests are sync writes.
    assert!(
        requests(&report)
            .iter()
            .filter(|r| r["pid"] == me && is_op(r, 'W'))
            .all(|r| r["rwbs"].as_str().unwrap().contains('S')),
        "{report}"
    );
    true
}

#[test]
fn osync_writes_attributed_to_writer_bpf() {
    osync_writes_attributed_to_writer("bpf", true);
}

#[test]
fn osync_writes_attributed_to_writer_perf() {
    with_quirk_retries(|last| osync_writes_attributed_to_writer("perf", last));
}

/// kdiag counts the same requests as the kernel's own counter (perf stat on
/// block:block_rq_issue) over the same run. Both count requests of our
/// distinctive size only, so the machine's other I/O cannot skew the result.
fn count_matches_perf_stat(tier: &str, last: bool) -> bool {
    let test = format!("count_matches_perf_stat_{tier}");
    if !require_root(&test) {
        return true;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _busy = BusyCpus::for_tier(tier);
    const N: usize = 300;
    let path = scratch(&format!("count-{tier}"), N * SIZE);
    let mut stat = Command::new("perf")
        .args(["stat", "-x,", "-a", "-e", "block:block_rq_issue"])
        // Reads and writes only: ext4 (mounted with discard) trims the
        // extents of files earlier tests removed, at its next journal
        // commit, in requests that may be of any size, ours included.
        .arg("--filter")
        .arg(format!(
            r#"bytes == {SIZE} && (rwbs ~ "*R*" || rwbs ~ "*W*")"#
        ))
        // A request the driver could not take (queue full) is requeued and
        // issued again: the kernel counts two issues for one request.
        .args(["-e", "block:block_rq_requeue", "--filter"])
        .arg(format!("nr_sector == {}", SIZE / 512))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("perf is installed");
    let tracer = Tracer::start(&["--json", "--tier", tier]);
    // perf stat has no ready signal: give it time to open its counters.
    std::thread::sleep(Duration::from_millis(1500));
    direct_writes_then_reads(&path, N);
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(stat.id() as i32, libc::SIGINT) };
    let (report, err) = tracer.stop();
    let mut stat_err = String::new();
    stat.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stat_err)
        .unwrap();
    stat.wait().unwrap();
    std::fs::remove_file(&path).unwrap();
    if !last && undelivered(&err) {
        return false;
    }
    let count = |event: &str| -> u64 {
        stat_err
            .lines()
            .find(|l| l.contains(event))
            .and_then(|l| l.split(',').next())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {event} count in perf stat output: {stat_err}"))
    };
    let (issues, requeues) = (
        count("block:block_rq_issue"),
        count("block:block_rq_requeue"),
    );
    let kernel = issues - requeues;
    let ours = requests(&report)
        .iter()
        .filter(|r| r["bytes"] == SIZE && (is_op(r, 'R') || is_op(r, 'W')))
        .count() as u64;
    // A request crossing an extent boundary of the file is split in two of
    // other sizes, so a few of the 2N may be missing from both counts.
    assert!(
        kernel >= 2 * N as u64 * 9 / 10,
        "perf stat saw {kernel}: {stat_err}"
    );
    let diff = ours.abs_diff(kernel) as f64 / kernel as f64;
    assert!(
        diff <= 0.01,
        "kdiag counted {ours} requests of {SIZE} bytes, perf stat {kernel} \
         ({issues} issues - {requeues} requeues; {:.1}% apart)\n{err}",
        diff * 100.0
    );
    true
}

#[test]
fn count_matches_perf_stat_bpf() {
    count_matches_perf_stat("bpf", true);
}

#[test]
fn count_matches_perf_stat_perf() {
    with_quirk_retries(|last| count_matches_perf_stat("perf", last));
}

/// With idle CPUs the kernel may count completions it never delivers to the
/// perf tier (see `BusyCpus`): every completion is then either matched or
/// reported in kdiag's shortfall line, never silently dropped.
#[test]
fn perf_tier_accounts_for_every_completion() {
    if !require_root("perf_tier_accounts_for_every_completion") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const N: usize = 40;
    let path = scratch("idle-perf", N * SIZE);
    let me = std::process::id();
    let tracer = Tracer::start(&["--json", "--tier", "perf", "-p", &me.to_string()]);
    direct_writes_then_reads(&path, N);
    let (report, err) = tracer.stop();
    std::fs::remove_file(&path).unwrap();
    let matched = requests(&report).iter().filter(|r| r["pid"] == me).count() as u64;
    let shortfall = err
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix("perf tier: the kernel counted ")?;
            let (counted, rest) = rest.split_once(" completions but delivered only ")?;
            let delivered = rest.split(' ').next()?;
            Some(counted.parse::<u64>().ok()? - delivered.parse::<u64>().ok()?)
        })
        .unwrap_or(0);
    assert!(
        matched + shortfall >= 2 * N as u64,
        "{matched} requests matched and {shortfall} completions reported undelivered, \
         of {} issued:\n{err}",
        2 * N
    );
}

#[test]
fn bpf_programs_are_gone_after_exit() {
    if !require_root("bpf_programs_are_gone_after_exit") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let progs = || {
        let out = Command::new("bpftool")
            .args(["prog", "show"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .matches("block_rq_issue")
            .count()
    };
    let before = progs();
    let tracer = Tracer::start(&["--json", "--tier", "bpf", "--hist"]);
    assert_eq!(progs(), before + 1, "the BPF tier's program is not loaded");
    let (report, _) = tracer.stop();
    assert!(report["histograms"].is_array(), "{report}");
    // The kernel frees a program after an RCU grace period: allow it a moment.
    for _ in 0..50 {
        if progs() == before {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("a block_rq_issue program outlived kdiag by 5 s");
}

#[test]
fn unknown_device_names_the_real_ones() {
    let out = run_kdiag(&["iosnoop", "--device", "nosuchdisk", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("no block device `nosuchdisk`"), "{err}");
    let first = std::fs::read_to_string("/proc/partitions").unwrap();
    let name = first
        .lines()
        .nth(2)
        .unwrap()
        .split_whitespace()
        .last()
        .unwrap()
        .to_string();
    assert!(err.contains(&name), "the error should list {name}: {err}");
}

#[test]
fn usage_errors() {
    let out = run_kdiag(&["iosnoop", "-p", "1", "-n", "dd"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = run_kdiag(&["iosnoop", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = run_kdiag(&["iosnoop", "--tier", "gpu"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
