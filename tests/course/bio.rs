//! Lab 4-bio (bio): reader threads in D state on tiny synchronous direct
//! reads; a high load on idle CPUs. That the symptom is real (D share,
//! CPU, load) is tests/symptoms/bio.rs's; here the lab's answers.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::lab_run::LabRun;
use crate::common::require_root;
use crate::course_common::{answer_all, expect, full_score, save_evidence, self_test, text};

/// The lab's answers for `seed`'s truth; with `evidence`, the off-CPU
/// profile made as the step says (of the running workload).
fn answers(lab: &LabRun, seed: &str, root: &Path, evidence: bool) -> Vec<(&'static str, String)> {
    let e = expect("bio", seed);
    let pid = lab.pid();
    let mut answers = vec![
        ("who.pid", pid.to_string()),
        ("who.comm", "bio".into()),
        ("what.threads", text(&e["threads"])),
        ("what.thread_name", text(&e["thread_name_prefix"])),
        ("what.state", text(&e["state"])),
        ("why.io_type", text(&e["io_type"])),
        ("why.io_bytes", text(&e["io_bytes"])),
        ("why.file", text(&e["file"])),
        ("why.function", text(&e["read_function"])),
        ("trend.verdict", "I/O".into()),
        ("trend.more_cpus", "no".into()),
    ];
    if evidence {
        let folded = root.join(format!("offcpu-{seed}.folded"));
        let args = ["offcpu", "-p", &pid.to_string(), "-d", "2", "--folded"];
        save_evidence(lab, &args, &folded);
        answers.push(("artifacts.offcpu", folded.display().to_string()));
    }
    answers
}

/// The names of `pid`'s threads.
fn thread_names(pid: u64) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .map(|c| c.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn reference_answers_of_two_seeds_reach_the_full_score() {
    if !require_root("reference_answers_of_two_seeds_reach_the_full_score") {
        return;
    }
    for (i, seed) in ["bio-a-1", "bio-b-2"].into_iter().enumerate() {
        let root = tempfile::tempdir().unwrap();
        // The first as the unprivileged learner through sudo, as on a
        // course server.
        let lab = match i {
            0 => LabRun::start_as_learner("4-bio", root.path(), seed),
            _ => LabRun::start("4-bio", root.path(), seed),
        };
        let pid = lab.pid();
        // The truth matches what the running workload does, once all its
        // readers have started: that many threads share the prefix.
        let e = expect("bio", seed);
        let (want, prefix) = (
            e["threads"].as_u64().unwrap() as usize,
            e["thread_name_prefix"].as_str().unwrap().to_string(),
        );
        let readers = || {
            thread_names(pid)
                .iter()
                .filter(|n| n.starts_with(&prefix))
                .count()
        };
        let t0 = Instant::now();
        while readers() != want && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(readers(), want, "{seed}: readers named {prefix}N");
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
    let mine = "bio-c-3";
    // A seed whose variant differs in every seeded fact.
    let other = (0..50)
        .map(|i| format!("bio-other-{i}"))
        .find(|s| {
            let (a, b) = (expect("bio", mine), expect("bio", s));
            ["threads", "thread_name_prefix", "file", "read_function"]
                .iter()
                .all(|k| a[k] != b[k])
        })
        .expect("another variant");
    let mut lab = LabRun::start("4-bio", root.path(), mine);
    let copied = answers(&lab, &other, root.path(), false);
    let mut wrong = answer_all(&mut lab, &copied);
    wrong.sort();
    assert_eq!(
        wrong,
        [
            "what.thread_name",
            "what.threads",
            "why.file",
            "why.function"
        ]
    );
    lab.send("quit");
    lab.finish();
}

#[test]
fn self_test_passes() {
    self_test("4-bio");
}
