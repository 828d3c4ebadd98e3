//! Nothing a `-- CMD` command starts outlives kdiag: SIGKILL of kdiag
//! (which it cannot catch) while CMD runs a tree of processes (a pipeline,
//! a background job, a setsid'd pair) leaves no process of that tree after
//! 2 s, in every trial; SIGINT and SIGTERM end kdiag with 130 / 143 and
//! nothing left either. For time, profile, exec-trace, diagnose and
//! workload run.
//!
//! Every process of a trial carries an environment variable unique to it,
//! so survivors are found wherever they were re-parented.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// CMD: a shell with a CPU pipeline, a background pipeline and a setsid'd
/// shell with a child of its own.
const TREE: &str = "yes | gzip > /dev/null & sleep 300 | cat & \
                    setsid sh -c 'sleep 300 & sleep 300' & wait";
/// Its processes: sh, yes, gzip, sleep, cat, sh, sleep, sleep.
const TREE_SIZE: usize = 8;
const TRIALS: usize = 20;
/// How long the tree may outlive kdiag.
const GRACE: Duration = Duration::from_secs(2);

/// (name, kdiag's arguments, processes below kdiag once all is running:
/// the supervisor and CMD's tree).
fn commands() -> Vec<(&'static str, Vec<String>, usize)> {
    let tree = |pre: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = pre.iter().map(|s| s.to_string()).collect();
        v.extend(["--", "sh", "-c", TREE].map(String::from));
        v
    };
    vec![
        ("time", tree(&["time"]), 1 + TREE_SIZE),
        ("profile", tree(&["profile", "-F", "49"]), 1 + TREE_SIZE),
        ("exec-trace", tree(&["exec-trace"]), 1 + TREE_SIZE),
        ("diagnose", tree(&["diagnose", "-d", "300"]), 1 + TREE_SIZE),
        (
            "workload run",
            ["workload", "run", "lock-contend", "--duration", "300"]
                .map(String::from)
                .to_vec(),
            2,
        ),
    ]
}

/// Live processes (not zombies) whose environment holds `marker`.
fn marked(marker: &str) -> Vec<u32> {
    let needle = format!("KDIAG_TRIAL={marker}");
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat
            .rsplit_once(") ")
            .is_none_or(|(_, r)| r.starts_with('Z'))
        {
            continue;
        }
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        if env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

/// Start kdiag with `args`, marked, and wait until `expect` processes run
/// below it.
fn start(args: &[String], marker: &str, expect: usize) -> Child {
    let mut cmd = kdiag();
    cmd.args(args)
        .env("KDIAG_TRIAL", marker)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let t = Instant::now();
    loop {
        let below = marked(marker)
            .into_iter()
            .filter(|&p| p != child.id())
            .count();
        if below >= expect {
            return child;
        }
        if t.elapsed() > Duration::from_secs(20) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("kdiag {args:?}: {below} of {expect} processes started");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Wait until nothing marked is left (kdiag itself is reaped by `wait`).
fn assert_nothing_left(what: &str, marker: &str, since: Instant) {
    loop {
        let left = marked(marker);
        if left.is_empty() {
            return;
        }
        if since.elapsed() > GRACE {
            let names: Vec<String> = left
                .iter()
                .map(|p| {
                    let comm =
                        std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
                    format!("{p} {}", comm.trim())
                })
                .collect();
            // Leave nothing behind for the next test, then fail.
            for p in &left {
                // SAFETY: kill(2) on a process the trial started.
                unsafe { libc::kill(*p as i32, libc::SIGKILL) };
            }
            panic!("{what}: left after {GRACE:?}: {names:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn sigkill_of_kdiag_leaves_nothing() {
    if !require_root("sigkill_of_kdiag_leaves_nothing") {
        return;
    }
    for (name, args, expect) in commands() {
        let t0 = Instant::now();
        for trial in 0..TRIALS {
            let marker = format!("{}-{name}-{trial}", std::process::id()).replace(' ', "_");
            let mut k = start(&args, &marker, expect);
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(k.id() as i32, libc::SIGKILL) };
            let killed = Instant::now();
            k.wait().unwrap();
            assert_nothing_left(&format!("{name}, trial {trial}"), &marker, killed);
        }
        eprintln!(
            "{name}: {TRIALS} trials in {:.1} s",
            t0.elapsed().as_secs_f64()
        );
    }
}

#[test]
fn sigint_and_sigterm_end_kdiag_and_the_tree() {
    if !require_root("sigint_and_sigterm_end_kdiag_and_the_tree") {
        return;
    }
    for (name, args, expect) in commands() {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            let marker = format!("{}-{name}-sig{sig}", std::process::id()).replace(' ', "_");
            let mut k = start(&args, &marker, expect);
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(k.id() as i32, sig) };
            let sent = Instant::now();
            let status = k.wait().unwrap();
            assert_eq!(
                status.code(),
                Some(128 + sig),
                "{name}: exit status after signal {sig}"
            );
            assert_nothing_left(&format!("{name} after signal {sig}"), &marker, sent);
        }
    }
}

/// `--pid` targets are watched, never signalled: a process kdiag did not
/// start lives on after kdiag ends, however it ends.
#[test]
fn a_pid_kdiag_did_not_start_is_never_signalled() {
    if !require_root("a_pid_kdiag_did_not_start_is_never_signalled") {
        return;
    }
    let mut target = command("sleep").arg("300").spawn().unwrap();
    let pid = target.id().to_string();
    for args in [
        vec!["diagnose", "-d", "300", "-p", &pid],
        vec!["profile", "-F", "49", "-p", &pid],
        vec!["exec-trace", "-p", &pid],
    ] {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGKILL] {
            let mut k = kdiag()
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_millis(700));
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(k.id() as i32, sig) };
            k.wait().unwrap();
            assert!(
                target.try_wait().unwrap().is_none() && Path::new(&format!("/proc/{pid}")).exists(),
                "{args:?}: signal {sig} to kdiag reached the watched process"
            );
        }
    }
    target.kill().unwrap();
    target.wait().unwrap();
}
