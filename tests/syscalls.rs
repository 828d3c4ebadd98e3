//! `kdiag syscalls` really tracing (root): this test binary, re-run as a
//! helper, makes a known number of system calls of its own (getppid, which
//! never blocks, and nanosleep, which does for a known least time), so the
//! BPF tier must count at least that many and time the sleeps at least as
//! long as asked, and the /proc tier must see a thread in nanosleep. The
//! helper says when it is done, and only then is kdiag stopped.

mod common;
use common::*;

use std::sync::Mutex;

use serde_json::Value;

/// Tests count kdiag's BPF programs on the machine: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// getppid calls the helper makes.
const GETPPIDS: u64 = 1000;
/// nanosleep calls the helper makes, and how long each asks for.
const SLEEPS: u64 = 20;
const SLEEP_NS: u64 = 5_000_000;

/// `n` calls of `nr` with `arg` (raw system calls: libc may answer some
/// calls without the kernel).
fn calls(nr: libc::c_long, arg: *const libc::timespec, n: u64) {
    for _ in 0..n {
        // SAFETY: getppid takes no argument; nanosleep reads a timespec
        // that lives for the call and may write nothing (no remainder).
        let r = unsafe { libc::syscall(nr, arg, std::ptr::null_mut::<libc::timespec>()) };
        assert!(r >= 0);
    }
}

/// The helper's calls: GETPPIDS getppid, `sleeps` nanosleeps of SLEEP_NS.
fn make_calls(sleeps: u64) {
    calls(libc::SYS_getppid, std::ptr::null(), GETPPIDS);
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: SLEEP_NS as i64,
    };
    calls(libc::SYS_nanosleep, &ts, sleeps);
}

/// The helper: started as this test binary with `--exact syscall_helper
/// --ignored` and KDIAG_SYSCALLS_HELPER set. `run`: make its calls and
/// exit. `wait`: wait for a line on stdin, make them with a second of
/// sleeps (a sampler has that long to see one), say `done` and wait for
/// stdin to close.
#[test]
#[ignore = "helper process for the other tests"]
fn syscall_helper() {
    self_helper::main("KDIAG_SYSCALLS_HELPER", |wait| {
        make_calls(if wait { 200 } else { SLEEPS })
    });
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

/// The report's line for call `name`.
fn call<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {report:#}"))
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn bpf_counts_and_times_the_helpers_calls() {
    if !require_root("bpf_counts_and_times_the_helpers_calls") {
        return;
    }
    let _serial = serial();
    let out = kdiag()
        .args(["syscalls", "--tier", "bpf", "--json", "--"])
        // The test harness's own lines would go into kdiag's JSON.
        .args(["sh", "-c", "exec \"$0\" \"$@\" >/dev/null"])
        .args(self_helper::args("syscall_helper"))
        .env("KDIAG_SYSCALLS_HELPER", "run")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = json(&out.stdout, &out.stderr);
    assert_eq!(report["tier"], "bpf");
    assert_eq!(report["counts"], "calls");
    let getppid = call(&report, "getppid");
    assert!(n(&getppid["count"]) >= GETPPIDS, "{getppid}");
    assert_eq!(n(&getppid["errors"]), 0, "{getppid}");
    let sleep = call(&report, "nanosleep");
    assert!(n(&sleep["count"]) >= SLEEPS, "{sleep}");
    // A sleep lasts at least what it asks for.
    assert!(n(&sleep["total_ns"]) >= SLEEPS * SLEEP_NS, "{sleep}");
    assert!(n(&sleep["max_ns"]) >= SLEEP_NS, "{sleep}");
    // exit_group never returns: counted at entry, and forgotten when its
    // thread ended, so nothing is left in progress once the helper is gone.
    let exit_group = call(&report, "exit_group");
    assert!(n(&exit_group["count"]) >= 1, "{exit_group}");
    assert_eq!(n(&exit_group["timed"]), 0, "{exit_group}");
    let calls = report["calls"].as_array().unwrap();
    assert!(
        calls.iter().all(|c| n(&c["in_progress"]) == 0),
        "{report:#}"
    );
    // Most time first.
    let totals: Vec<u64> = calls.iter().map(|c| n(&c["total_ns"])).collect();
    assert!(totals.windows(2).all(|w| w[0] >= w[1]), "{totals:?}");
    // The text report says the same.
    let text = kdiag()
        .args(["syscalls", "--tier", "bpf", "--"])
        .args(["sh", "-c", "exec \"$0\" \"$@\" >/dev/null"])
        .args(self_helper::args("syscall_helper"))
        .env("KDIAG_SYSCALLS_HELPER", "run")
        .output()
        .unwrap();
    assert_eq!(text.status.code(), Some(0), "{}", stderr(&text));
    let text = stdout(&text);
    let line = text
        .lines()
        .find(|l| l.ends_with(" getppid"))
        .unwrap_or_else(|| panic!("{text}"));
    let count: u64 = line.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(count >= GETPPIDS, "{text}");
    assert!(text.contains("Tier: BPF"), "{text}");
}

/// The /proc tier on a running process (-p): the helper sleeps while
/// traced, and kdiag is stopped (SIGINT) only once it says it is done.
#[test]
fn proc_sees_the_helper_sleeping() {
    if !require_root("proc_sees_the_helper_sleeping") {
        return;
    }
    let _serial = serial();
    let (status, stdout, seen) = self_helper::traced_while_acting(
        "KDIAG_SYSCALLS_HELPER",
        "syscall_helper",
        &["syscalls", "--tier", "proc", "--json"],
        "Tracing system calls",
    );
    assert_eq!(status.code(), Some(0), "{seen}");
    let report = json(&stdout, seen.as_bytes());
    assert_eq!(report["tier"], "procfs");
    assert_eq!(report["counts"], "samples");
    // A second asleep, sampled every 5 ms: seen, and untimed.
    let sleep = call(&report, "nanosleep");
    assert!(n(&sleep["count"]) >= 1, "{sleep}");
    assert!(sleep.get("total_ns").is_none(), "{sleep}");
    assert!(
        report["notes"][0]
            .as_str()
            .unwrap()
            .contains("samples, not calls"),
        "{report}"
    );
}

/// A target is required before anything is loaded.
#[test]
fn one_target_is_required() {
    let out = kdiag().args(["syscalls", "-d", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("say what to trace"),
        "{}",
        stderr(&out)
    );
}
