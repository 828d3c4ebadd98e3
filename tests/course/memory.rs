//! Lab 3-memory (memory): a backup job copying through a 1 KiB buffer;
//! the learner times copies of their own seed with mmap and read/write.

use std::path::Path;

use crate::common::lab_run::LabRun;
use crate::common::require_root;
use crate::course_common::{answer_all, expect_args, full_score, self_test, text, time_workload};

/// The lab's answers for `seed`'s truth, the timings made as the steps say
/// (in a scratch folder of their own: the lab's job holds the default).
fn answers(lab: &LabRun, seed: &str, root: &Path) -> Vec<(&'static str, String)> {
    let e = expect_args("memory", &["1", "1K"], seed);
    let scratch = root.join("copy-test");
    let scratch = scratch.to_str().unwrap();
    let time = |file: &str, mode: &str, blk: &str| {
        let file = format!("{file}-{seed}.txt");
        let args = ["memory", mode, blk, "--seed", seed, "--scratch", scratch];
        time_workload(lab, root, &file, &args).display().to_string()
    };
    vec![
        ("who.pid", lab.pid().to_string()),
        ("who.comm", "memory".into()),
        ("what.file", text(&e["src"])),
        ("what.block", text(&e["block_bytes"])),
        ("artifacts.time_rw_1k", time("rw-1k", "1", "1K")),
        ("what.syscalls", text(&e["syscalls"])),
        ("why.function", text(&e["copy_function"])),
        ("why.calls_per_block", "2".into()),
        ("trend.faster_1k", "mmap".into()),
        ("trend.faster_64k", "read/write".into()),
        ("trend.best_block", "256K".into()),
        ("artifacts.time_mmap_1k", time("mmap-1k", "0", "1K")),
        ("artifacts.time_rw_64k", time("rw-64k", "1", "64K")),
    ]
}

/// syscr + syscw of a kdiag time -v report.
fn calls(report: &str) -> u64 {
    report
        .lines()
        .filter(|l| l.contains("system calls (sysc"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

#[test]
fn reference_answers_of_two_seeds_reach_the_full_score() {
    if !require_root("reference_answers_of_two_seeds_reach_the_full_score") {
        return;
    }
    for (i, seed) in ["mem-a-1", "mem-b-2"].into_iter().enumerate() {
        let root = tempfile::tempdir().unwrap();
        // The first as the unprivileged learner through sudo, as on a
        // course server.
        let lab = match i {
            0 => LabRun::start_as_learner("3-memory", root.path(), seed),
            _ => LabRun::start("3-memory", root.path(), seed),
        };
        let mut answers = answers(&lab, seed, root.path());
        // The count the learner reads in their report passes too: the
        // copy's calls and the few around it.
        let report = std::fs::read_to_string(&answers[4].1).unwrap();
        let measured = calls(&report);
        let want: u64 = answers[5].1.parse().unwrap();
        assert!(
            measured >= want && measured - want < 1000,
            "{measured} vs {want}"
        );
        answers[5].1 = measured.to_string();
        full_score(lab, &answers, "16/16", seed);
        assert!(!root.path().join("copy-test").exists(), "no scratch left");
    }
}

#[test]
fn another_seeds_answers_fail_the_seeded_checks() {
    if !require_root("another_seeds_answers_fail_the_seeded_checks") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let mine = "mem-c-3";
    // A seed whose file, size and copy function all differ.
    let other = (0..50)
        .map(|i| format!("mem-other-{i}"))
        .find(|s| {
            let (a, b) = (
                expect_args("memory", &["1", "1K"], mine),
                expect_args("memory", &["1", "1K"], s),
            );
            ["src", "syscalls", "copy_function"]
                .iter()
                .all(|k| a[k] != b[k])
        })
        .expect("another variant");
    let mut lab = LabRun::start("3-memory", root.path(), mine);
    let copied = answers(&lab, &other, root.path());
    let mut wrong = answer_all(&mut lab, &copied);
    wrong.sort();
    assert_eq!(
        wrong,
        [
            "artifacts.time_mmap_1k",
            "artifacts.time_rw_1k",
            "artifacts.time_rw_64k",
            "what.file",
            "what.syscalls",
            "why.function"
        ],
    );
    lab.send("quit");
    lab.finish();
}

#[test]
fn self_test_passes() {
    self_test("3-memory");
}
