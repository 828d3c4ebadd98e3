//! `kdiag doctor` on this machine: the probes really load BPF programs and
//! open perf events, so these tests assert the known facts of the
//! development VM (Linux 6.18): tracepoints and tp_btf work, fentry is
//! denied, there is no hardware PMU and sampling falls back to cpu-clock.

mod common;
use common::*;

use std::os::unix::process::CommandExt;

fn doctor_json(cmd: &mut std::process::Command) -> serde_json::Value {
    let out = cmd.args(["doctor", "--json"]).output().expect("kdiag runs");
    assert!(out.status.success(), "doctor failed: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("doctor --json is JSON")
}

fn status<'a>(report: &'a serde_json::Value, probe: &str) -> &'a str {
    report["probes"][probe]["status"]
        .as_str()
        .unwrap_or_else(|| panic!("no probe {probe}"))
}

fn feature<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["features"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no feature {name}"))
}

#[test]
fn known_facts_of_this_machine() {
    if !require_root("known_facts_of_this_machine") {
        return;
    }
    let r = doctor_json(&mut kdiag());
    for probe in [
        "tracefs",
        "btf",
        "perf_tracepoint",
        "bpf_tracepoint",
        "bpf_tp_btf",
        "cpu_clock",
        "sched_prepare_exec",
        "bpf_iter_ksyms",
        "bpf_iter_task",
    ] {
        assert_eq!(status(&r, probe), "ok", "{probe}: {}", r["probes"][probe]);
    }
    assert_eq!(
        status(&r, "bpf_fentry"),
        "denied",
        "{}",
        r["probes"]["bpf_fentry"]
    );
    assert!(
        r["probes"]["bpf_fentry"]["detail"]
            .as_str()
            .unwrap()
            .contains("EPERM")
    );
    assert_eq!(
        status(&r, "hardware_pmu"),
        "missing",
        "{}",
        r["probes"]["hardware_pmu"]
    );
    assert_eq!(status(&r, "kprobe_pmu"), "missing");
    assert_eq!(status(&r, "uprobe_pmu"), "ok");

    let profile = feature(&r, "profile");
    assert_eq!(profile["tier"], "perf");
    assert_eq!(profile["available"], serde_json::json!(["perf"]));
    assert!(
        profile["note"].as_str().unwrap().contains("cpu-clock"),
        "{profile}"
    );
    assert_eq!(feature(&r, "iosnoop")["tier"], "bpf");
    assert_eq!(feature(&r, "exec-trace")["tier"], "bpf");
    assert_eq!(feature(&r, "kernel frame names")["tier"], "bpf");
    assert_eq!(feature(&r, "watch")["tier"], "bpf");
    assert_eq!(feature(&r, "top: I/O columns")["tier"], "procfs");
}

#[test]
fn table_explains_what_is_not_ok() {
    if !require_root("table_explains_what_is_not_ok") {
        return;
    }
    let out = run_kdiag(&["doctor"]);
    assert!(out.status.success());
    let text = stdout(&out);
    let fentry = text
        .lines()
        .find(|l| l.starts_with("BPF fentry "))
        .expect("fentry row");
    assert!(fentry.contains("denied"), "{fentry}");
    assert!(text.contains("How to fix:"), "{text}");
    assert!(text.contains("hardware PMU: none needed"), "{text}");
    let header = text
        .lines()
        .find(|l| l.starts_with("FEATURE"))
        .expect("feature table");
    assert!(header.contains("TIER"));
}

#[test]
fn unprivileged_user_is_told_to_use_sudo() {
    if !require_root("unprivileged_user_is_told_to_use_sudo") {
        return;
    }
    // Drop to nobody: every privileged probe must say denied, not crash.
    let r = doctor_json(kdiag().uid(65534).gid(65534));
    assert_eq!(status(&r, "user"), "denied");
    for probe in ["bpf_tracepoint", "bpf_tp_btf", "cpu_clock", "tracefs"] {
        assert_eq!(
            status(&r, probe),
            "denied",
            "{probe}: {}",
            r["probes"][probe]
        );
        let fix = r["probes"][probe]["fix"].as_str().unwrap();
        assert!(fix.contains("sudo"), "{probe}: {fix}");
    }
    assert!(feature(&r, "profile")["tier"].is_null());
    assert!(
        feature(&r, "profile")["note"]
            .as_str()
            .unwrap()
            .contains("sudo")
    );
    assert_eq!(feature(&r, "time: storage bytes")["tier"], "procfs");
}
