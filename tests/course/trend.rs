//! Lab 7-trend (mem-leak --cap 4G): resident memory that grows at a steady
//! rate; the rate and the time to the cap are measured, within a tolerance.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::lab_run::LabRun;
use crate::common::require_root;
use crate::course_common::{answer_all, expect, full_score, save_evidence, self_test, text};

/// The tolerance of the lab's measured checks (checks/7-trend.toml).
const TOLERANCE: f64 = 0.15;

/// VmRSS of `pid` in bytes.
fn rss(pid: u64) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<f64>()
        .unwrap()
        * 1024.0
}

/// The rate as a learner measures it: two readings of VmRSS `secs` apart.
fn measured_rate(pid: u64, secs: f64) -> f64 {
    let (r0, t0) = (rss(pid), Instant::now());
    std::thread::sleep(Duration::from_secs_f64(secs));
    (rss(pid) - r0) / t0.elapsed().as_secs_f64()
}

/// The lab's answers: measured as the steps say (the rate from /proc, the
/// time to the 4 GiB cap from that rate, the evidence from a profile).
fn answers(lab: &LabRun, seed: &str, rate: f64, root: &Path) -> Vec<(&'static str, String)> {
    let e = expect("mem-leak", seed);
    let pid = lab.pid();
    let folded = root.join(format!("profile-{seed}.folded"));
    // A learner profiles again when the first profile caught no fault in
    // the leak (the workload mostly sleeps: at the slowest seeded rate,
    // 2 MiB/s, about 6 fault samples in 10 s at 999 Hz, 28 at 4999 Hz).
    let want = [text(&e["leak_function"]), "page_fault".to_string()];
    for _ in 0..3 {
        let args = [
            "profile",
            "-p",
            &pid.to_string(),
            "-F",
            "4999",
            "-d",
            "10",
            "--folded",
        ];
        save_evidence(lab, &args, &folded);
        let got = std::fs::read_to_string(&folded).unwrap_or_default();
        if want.iter().all(|w| got.contains(w.as_str())) {
            break;
        }
    }
    let cap = (4u64 << 30) as f64;
    vec![
        ("who.pid", pid.to_string()),
        ("who.comm", "mem-leak".into()),
        ("what.rate", format!("{:.2} MiB/s", rate / (1 << 20) as f64)),
        ("what.kind", "anonymous".into()),
        ("why.function", text(&e["leak_function"])),
        ("artifacts.profile", folded.display().to_string()),
        ("trend.shape", "increasing".into()),
        ("trend.limit_after", format!("{:.0} s", cap / rate)),
    ]
}

#[test]
fn reference_answers_of_two_seeds_reach_the_full_score() {
    if !require_root("reference_answers_of_two_seeds_reach_the_full_score") {
        return;
    }
    for (i, seed) in ["trend-a-1", "trend-b-2"].into_iter().enumerate() {
        let root = tempfile::tempdir().unwrap();
        // The first as the unprivileged learner through sudo, as on a
        // course server.
        let lab = match i {
            0 => LabRun::start_as_learner("7-trend", root.path(), seed),
            _ => LabRun::start("7-trend", root.path(), seed),
        };
        let pid = lab.pid();
        let want = expect("mem-leak", seed)["rate_bytes_per_s"]
            .as_f64()
            .unwrap();
        // What a learner reads over 10 s is the truth, well within the
        // tolerance.
        std::thread::sleep(Duration::from_secs(1));
        let rate = measured_rate(pid, 10.0);
        let off = (rate - want).abs() / want;
        eprintln!(
            "{seed}: measured {rate:.0} B/s, truth {want}, off by {:.1}%",
            off * 100.0
        );
        assert!(off < TOLERANCE / 3.0, "{seed}: {rate} vs {want}");
        let answers = answers(&lab, seed, rate, root.path());
        full_score(lab, &answers, "13/13", seed);
    }
}

#[test]
fn another_seeds_answers_fail_the_seeded_checks() {
    if !require_root("another_seeds_answers_fail_the_seeded_checks") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let mine = "trend-c-3";
    // A seed whose rate is outside the tolerance and whose function differs.
    let other = (0..50)
        .map(|i| format!("trend-other-{i}"))
        .find(|s| {
            let (a, b) = (expect("mem-leak", mine), expect("mem-leak", s));
            let (ra, rb) = (
                a["rate_bytes_per_s"].as_f64().unwrap(),
                b["rate_bytes_per_s"].as_f64().unwrap(),
            );
            (ra - rb).abs() > 2.0 * TOLERANCE * ra && a["leak_function"] != b["leak_function"]
        })
        .expect("another variant");
    let mut lab = LabRun::start("7-trend", root.path(), mine);
    let rate = expect("mem-leak", &other)["rate_bytes_per_s"]
        .as_f64()
        .unwrap();
    let mut copied = answers(&lab, &other, rate, root.path());
    // The PID is the running workload's either way; the evidence is this
    // run's profile (its function is checked in why.function).
    copied[0].1 = lab.pid().to_string();
    let mut wrong = answer_all(&mut lab, &copied);
    wrong.sort();
    for key in ["what.rate", "why.function", "trend.limit_after"] {
        assert!(wrong.contains(&key.to_string()), "{key}: {wrong:?}");
    }
    lab.send("quit");
    lab.finish();
}

#[test]
fn self_test_passes() {
    self_test("7-trend");
}
