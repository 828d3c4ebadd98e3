//! `kdiag faults` really tracing (root): this test binary, re-run as a
//! helper, touches a known number of fresh anonymous pages in a function
//! of its own, so each tier must count at least that many faults (on that
//! function's stacks, for BPF). Pages are counted, never time: the helper
//! says when it is done, and only then is kdiag stopped.

mod common;
use common::*;

use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::Value;

/// Tests count kdiag's BPF programs on the machine: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Pages the helper touches.
const PAGES: u64 = 512;

/// Touch `n` fresh pages of anonymous memory, one write each: `n` faults
/// here (huge pages off, so each page is its own fault). Never inlined, so
/// it is the frame the faults happen in.
#[inline(never)]
fn touch_pages(n: usize) {
    // SAFETY: sysconf has no preconditions; the mapping is ours, written
    // within its length, and left mapped until the helper exits.
    unsafe {
        let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
        let p = libc::mmap(
            std::ptr::null_mut(),
            n * page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        libc::madvise(p, n * page, libc::MADV_NOHUGEPAGE);
        for i in 0..n {
            std::ptr::write_volatile((p as *mut u8).add(i * page), 1);
        }
    }
}

/// The helper: started as this test binary with `--exact fault_helper
/// --ignored` and KDIAG_FAULTS_HELPER set. `run`: touch PAGES pages and
/// exit. `wait`: wait for a line on stdin, touch them, say `done` and wait
/// for stdin to close.
#[test]
#[ignore = "helper process for the other tests"]
fn fault_helper() {
    self_helper::main("KDIAG_FAULTS_HELPER", |_| touch_pages(PAGES as usize));
}

fn json(stdout: &[u8], stderr: &[u8]) -> Value {
    serde_json::from_slice(stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(stdout),
            String::from_utf8_lossy(stderr)
        )
    })
}

/// Faults of the stacks having a frame ending in `name`, and of all.
fn faults_under(report: &Value, name: &str) -> (u64, u64) {
    let stacks = report["profile"]["stacks"].as_array().unwrap();
    let weight = |s: &Value| s["weight"].as_u64().unwrap();
    let under = stacks
        .iter()
        .filter(|s| {
            s["frames"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["name"].as_str().unwrap().ends_with(name))
        })
        .map(weight)
        .sum();
    (under, stacks.iter().map(weight).sum())
}

#[test]
fn bpf_counts_the_touched_pages_on_the_touching_function() {
    if !require_root("bpf_counts_the_touched_pages_on_the_touching_function") {
        return;
    }
    let _serial = serial();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join(format!("faults-{}.svg", std::process::id()));
    let folded = dir.join(format!("faults-{}.folded", std::process::id()));
    let out = kdiag()
        .args(["faults", "--tier", "bpf", "--json", "--svg"])
        .arg(&svg)
        .arg("--folded")
        .arg(&folded)
        .arg("--")
        // The test harness's own lines would go into kdiag's JSON.
        .args(["sh", "-c", "exec \"$0\" \"$@\" >/dev/null"])
        .args(self_helper::args("fault_helper"))
        .env("KDIAG_FAULTS_HELPER", "run")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = json(&out.stdout, &out.stderr);
    assert_eq!(report["profile"]["unit"], "events");
    assert_eq!(report["profile"]["event"], "page-faults");
    let (under, all) = faults_under(&report, "touch_pages");
    assert!(
        under >= PAGES,
        "{under} faults under touch_pages, of {all}; {PAGES} pages touched:\n{}",
        report["summary"]
    );
    // The report's own count, and the files, say the same.
    assert_eq!(report["summary"]["samples"].as_u64(), Some(all));
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.contains("Page-faults of"), "{svg_text}");
    assert!(svg_text.contains("touch_pages"));
    let folded_text = std::fs::read_to_string(&folded).unwrap();
    let in_folded: u64 = folded_text
        .lines()
        .filter(|l| l.contains("touch_pages"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(in_folded, under, "{folded_text}");
    let _ = std::fs::remove_file(&svg);
    let _ = std::fs::remove_file(&folded);
}

/// The /proc tier on a running process (-p): the helper touches its pages
/// while traced, and kdiag is stopped (SIGINT) only once it says it is done.
#[test]
fn proc_counts_the_touched_pages_of_the_thread() {
    if !require_root("proc_counts_the_touched_pages_of_the_thread") {
        return;
    }
    let _serial = serial();
    let (status, stdout, seen) = self_helper::traced_while_acting(
        "KDIAG_FAULTS_HELPER",
        "fault_helper",
        &["faults", "--tier", "proc", "--json"],
        "Tracing page faults",
    );
    assert_eq!(status.code(), Some(0), "{seen}");
    let report = json(&stdout, seen.as_bytes());
    assert_eq!(report["profile"]["unit"], "events");
    assert_eq!(report["profile"]["event"], "page-faults");
    assert!(
        report["profile"]["collection"]
            .as_str()
            .unwrap()
            .starts_with("/proc"),
        "{report}"
    );
    // One stack per thread; the helper's test thread touched the pages.
    let total: u64 = report["profile"]["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["weight"].as_u64().unwrap())
        .sum();
    assert!(
        total >= PAGES,
        "{total} faults, {PAGES} pages touched: {report}"
    );
    assert!(
        report["profile"]["notes"][0]
            .as_str()
            .unwrap()
            .contains("no code paths"),
        "{report}"
    );
}

/// A target that is not there is refused before anything is loaded.
#[test]
fn one_target_is_required() {
    let out = kdiag().args(["faults", "-d", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("say what to trace"),
        "{}",
        stderr(&out)
    );
}
