//! Lab 1-io (io-stall): bursts of dirty page cache that the kernel's
//! flusher writes out while the culprit looks idle.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::lab_run::LabRun;
use crate::common::{kdiag, require_root, stdout};
use crate::course_common::{answer_all, expect, full_score, save_evidence, self_test, text};

/// The lab's answers for `seed`'s truth; with `evidence`, the profile made
/// as the step says (of the running workload).
fn answers(lab: &LabRun, seed: &str, root: &Path, evidence: bool) -> Vec<(&'static str, String)> {
    let e = expect("io-stall", seed);
    let pid = lab.pid();
    let mut answers = vec![
        ("who.writer", "kworker".to_string()),
        ("who.pid", pid.to_string()),
        ("who.comm", "io-stall".into()),
        ("what.period_s", text(&e["period_s"])),
        ("what.burst_bytes", text(&e["burst_bytes"])),
        ("why.function", text(&e["dirty_function"])),
        ("why.file", text(&e["file"])),
        ("why.syscall", "syncfs".into()),
        ("trend.pattern", "periodic".into()),
        ("trend.without_sync", "after about 30 s".into()),
    ];
    if evidence {
        let folded = root.join(format!("profile-{seed}.folded"));
        let pid = pid.to_string();
        let args = ["profile", "-p", &pid, "-d", "5", "-F", "999", "--folded"];
        save_evidence(lab, &args, &folded);
        answers.push(("artifacts.profile", folded.display().to_string()));
    }
    answers
}

/// `write_bytes` of /proc/PID/io.
fn write_bytes(pid: u64) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// What step 2 has the learner do: watch write_bytes and time its steps.
/// A burst may straddle readings: increases less than 300 ms apart are one
/// burst. The size of a whole burst and the time between two starts. The
/// first burst may be cut by the start of the watch; of the two whole ones
/// after it the smaller is the burst: a `sync` elsewhere on the machine
/// (`stress-ng --io` beside CI) can clean a page mid-burst and the kernel
/// then counts its re-dirtying again (one step read 129 MiB for 128).
fn measure_bursts(pid: u64) -> (u64, f64) {
    let t0 = Instant::now();
    let mut last = (write_bytes(pid), t0);
    // (start, bytes) of each burst seen.
    let mut bursts: Vec<(Instant, u64)> = vec![];
    while bursts.len() < 4 && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
        let (now, at) = (write_bytes(pid), Instant::now());
        if now > last.0 {
            match bursts.last_mut() {
                Some(b) if at.duration_since(last.1) < Duration::from_millis(300) => {
                    b.1 += now - last.0
                }
                _ => bursts.push((at, now - last.0)),
            }
            last = (now, at);
        }
    }
    assert_eq!(bursts.len(), 4, "four bursts in 30 s: {bursts:?}");
    let period = bursts[2].0.duration_since(bursts[1].0).as_secs_f64();
    (bursts[1].1.min(bursts[2].1), period)
}

/// Bytes the kworkers and the workload wrote in 3 s, from kdiag iosnoop.
fn iosnoop_writes(pid: u64) -> (u64, u64) {
    let out = kdiag()
        .args(["iosnoop", "--summary", "--json", "3"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stdout(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (mut kworkers, mut workload) = (0, 0);
    for p in v["processes"].as_array().unwrap() {
        let bytes = p["write_bytes"].as_u64().unwrap();
        if p["comm"].as_str().unwrap().starts_with("kworker") {
            kworkers += bytes;
        } else if p["pid"].as_u64() == Some(pid) {
            workload += bytes;
        }
    }
    (kworkers, workload)
}

#[test]
fn reference_answers_of_two_seeds_reach_the_full_score() {
    if !require_root("reference_answers_of_two_seeds_reach_the_full_score") {
        return;
    }
    for (i, seed) in ["io-a-1", "io-b-2"].into_iter().enumerate() {
        let root = tempfile::tempdir().unwrap();
        // The first as the unprivileged learner through sudo, as on a
        // course server.
        let lab = match i {
            0 => LabRun::start_as_learner("1-io", root.path(), seed),
            _ => LabRun::start("1-io", root.path(), seed),
        };
        let pid = lab.pid();
        let e = expect("io-stall", seed);
        // The truth is what a learner measures: write_bytes steps by the
        // burst (give or take a few KiB of metadata: whole MiB), at the
        // period (to the nearest quarter second).
        let (step, period) = measure_bursts(pid);
        let burst = e["burst_bytes"].as_u64().unwrap();
        assert_eq!((step + (1 << 19)) >> 20, burst >> 20, "{seed}: step {step}");
        let want = e["period_s"].as_f64().unwrap();
        assert_eq!(
            (period * 4.0).round() / 4.0,
            want,
            "{seed}: period {period}"
        );
        // The disk writes are the flusher's, not the workload's.
        let (kworkers, workload) = iosnoop_writes(pid);
        assert!(
            kworkers >= burst / 2 && workload < burst / 8,
            "{seed}: kworkers wrote {kworkers}, io-stall {workload}"
        );
        let answers = answers(&lab, seed, root.path(), true);
        full_score(lab, &answers, "16/16", seed);
    }
}

#[test]
fn another_seeds_answers_fail_the_seeded_checks() {
    if !require_root("another_seeds_answers_fail_the_seeded_checks") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let mine = "io-c-3";
    // A seed whose variant differs in every seeded fact.
    let other = (0..50)
        .map(|i| format!("io-other-{i}"))
        .find(|s| {
            let (a, b) = (expect("io-stall", mine), expect("io-stall", s));
            ["period_s", "burst_bytes", "dirty_function", "file"]
                .iter()
                .all(|k| a[k] != b[k])
        })
        .expect("another variant");
    let mut lab = LabRun::start("1-io", root.path(), mine);
    let copied = answers(&lab, &other, root.path(), false);
    let mut wrong = answer_all(&mut lab, &copied);
    wrong.sort();
    assert_eq!(
        wrong,
        [
            "what.burst_bytes",
            "what.period_s",
            "why.file",
            "why.function"
        ]
    );
    lab.send("quit");
    lab.finish();
}

#[test]
fn self_test_passes() {
    self_test("1-io");
}
