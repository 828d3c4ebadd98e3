//! Lab 6-lock (lock-contend): threads queued on one mutex whose holder
//! sleeps.

use std::path::Path;

use crate::common::lab_run::LabRun;
use crate::common::require_root;
use crate::course_common::{answer_all, expect, full_score, save_evidence, self_test, text};

/// The lab's answers for `seed`'s truth, the evidence made as the step says.
fn answers(lab: &LabRun, seed: &str, root: &Path) -> Vec<(&'static str, String)> {
    let e = expect("lock-contend", seed);
    let pid = lab.pid();
    let folded = root.join(format!("offcpu-{seed}.folded"));
    let args = ["offcpu", "-p", &pid.to_string(), "-d", "2", "--folded"];
    save_evidence(lab, &args, &folded);
    vec![
        ("who.pid", pid.to_string()),
        ("who.comm", "lock-contend".into()),
        ("what.threads", text(&e["threads"])),
        ("what.thread_name", text(&e["thread_name_prefix"])),
        ("what.state", text(&e["state"])),
        ("what.syscall", text(&e["wait_syscall"])),
        ("why.function", text(&e["lock_function"])),
        ("why.holder_syscall", text(&e["holder_syscall"])),
        ("artifacts.offcpu", folded.display().to_string()),
        ("trend.more_threads", "no".into()),
    ]
}

#[test]
fn reference_answers_of_two_seeds_reach_the_full_score() {
    if !require_root("reference_answers_of_two_seeds_reach_the_full_score") {
        return;
    }
    for (i, seed) in ["lock-a-1", "lock-b-2"].into_iter().enumerate() {
        let root = tempfile::tempdir().unwrap();
        // The first as the unprivileged learner through sudo, as on a
        // course server.
        let lab = match i {
            0 => LabRun::start_as_learner("6-lock", root.path(), seed),
            _ => LabRun::start("6-lock", root.path(), seed),
        };
        let pid = lab.pid();
        // The truth matches what the running workload does, once all its
        // workers have started.
        let want = expect("lock-contend", seed)["threads"].as_u64().unwrap() + 1;
        let tasks =
            || std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count()) as u64;
        let t0 = std::time::Instant::now();
        while tasks() != want && t0.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert_eq!(tasks(), want, "workers + main");
        let answers = answers(&lab, seed, root.path());
        full_score(lab, &answers, "14/14", seed);
    }
}

#[test]
fn another_seeds_answers_fail_the_seeded_checks() {
    if !require_root("another_seeds_answers_fail_the_seeded_checks") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let mine = "lock-c-3";
    // A seed whose variant differs in the worker count and the function.
    let other = (0..50)
        .map(|i| format!("lock-other-{i}"))
        .find(|s| {
            let (a, b) = (expect("lock-contend", mine), expect("lock-contend", s));
            a["threads"] != b["threads"] && a["lock_function"] != b["lock_function"]
        })
        .expect("another variant");
    let mut lab = LabRun::start("6-lock", root.path(), mine);
    let mut copied = answers(&lab, &other, root.path());
    // The PID is the running workload's either way.
    copied[0].1 = lab.pid().to_string();
    let mut wrong = answer_all(&mut lab, &copied);
    wrong.sort();
    assert!(wrong.contains(&"what.threads".to_string()), "{wrong:?}");
    assert!(wrong.contains(&"why.function".to_string()), "{wrong:?}");
    lab.send("quit");
    lab.finish();
}

#[test]
fn self_test_passes() {
    self_test("6-lock");
}
