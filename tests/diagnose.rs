//! `kdiag diagnose` on the bundled workloads: each verdict must be the class
//! the workload says it exhibits (`--describe`), from real /proc numbers.

mod common;

use std::process::Command;

use common::{free_pid, kdiag, run_kdiag, stderr, workload};

/// Diagnose `argv` (started by kdiag) for `secs`; the JSON report.
fn diagnose(secs: &str, argv: &[&str]) -> serde_json::Value {
    let out = kdiag()
        .args(["diagnose", "--json", "-d", secs, "--"])
        .args(argv)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn expected_class(name: &str) -> String {
    let out = Command::new(workload(name))
        .arg("--describe")
        .output()
        .unwrap();
    let truth: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    truth["expect"]["class"].as_str().unwrap().to_string()
}

/// One after another (and the other tests here are light): run side by
/// side, the workloads would steal each other's CPU.
#[test]
fn verdicts_match_what_the_workloads_do() {
    for name in ["cpu-burn", "io-app", "lock-contend", "mem-leak"] {
        let bin = workload(name);
        let report = diagnose("2.5", &[bin.to_str().unwrap()]);
        let verdict = report["diagnosis"]["verdict"].as_str().unwrap();
        assert_eq!(
            verdict,
            expected_class(name),
            "{name}: {}",
            serde_json::to_string_pretty(&report["diagnosis"]).unwrap()
        );
        // The command kdiag started is gone (stopped and reaped).
        let pid = report["observation"]["pid"].as_i64().unwrap();
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "{name} ({pid}) left running"
        );
    }
    let idle = diagnose("1", &["sleep", "30"]);
    assert_eq!(idle["diagnosis"]["verdict"], "idle");

    // The text report leads with the verdict and names the next tool.
    let out = kdiag()
        .args(["diagnose", "-d", "1.5", "--"])
        .arg(workload("cpu-burn"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("Verdict: cpu: CPU-bound"), "{text}");
    assert!(text.contains("user space"), "{text}");
    assert!(text.contains("kdiag profile -p "), "{text}");
}

#[test]
fn diagnoses_a_running_pid() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let out = run_kdiag(&[
        "diagnose",
        "--json",
        "-d",
        "0.5",
        "-p",
        &child.id().to_string(),
    ]);
    let _ = child.kill();
    let _ = child.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["observation"]["comm"], "sleep");
    assert_eq!(v["diagnosis"]["verdict"], "idle");
}

#[test]
fn bad_targets_are_clear_errors() {
    let gone = free_pid();
    let out = run_kdiag(&["diagnose", "-p", &gone]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains(&format!("no process with PID {gone}")));
    let out = run_kdiag(&["diagnose"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("-p PID, or -- CMD"));
    let out = run_kdiag(&["diagnose", "-d", "0", "-p", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run_kdiag(&["diagnose", "--", "sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("(exited with code 3): nothing to diagnose"),
        "{}",
        stderr(&out)
    );
    let out = run_kdiag(&["diagnose", "--", "/nonexistent/prog"]);
    assert_eq!(out.status.code(), Some(127));
    assert!(stderr(&out).contains("cannot run"), "{}", stderr(&out));
}
