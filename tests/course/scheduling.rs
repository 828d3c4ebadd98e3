//! Lab 2-scheduling (scheduling): a job runner that forks a process per
//! job; the learner times a batch of each mode with their own seed.

use std::path::Path;

use crate::common::lab_run::LabRun;
use crate::common::require_root;
use crate::course_common::{answer_all, expect_args, full_score, self_test, text, time_workload};

/// The lab's answers for `seed`'s truth, the timings made as the steps say.
fn answers(lab: &LabRun, seed: &str, root: &Path) -> Vec<(&'static str, String)> {
    let e = expect_args("scheduling", &["1"], seed);
    let fork = time_workload(
        lab,
        root,
        &format!("fork-{seed}.txt"),
        &["scheduling", "1", "--seed", seed],
    );
    let threads = time_workload(
        lab,
        root,
        &format!("threads-{seed}.txt"),
        &["scheduling", "0", "--seed", seed],
    );
    vec![
        ("who.pid", lab.pid().to_string()),
        ("who.comm", "scheduling".into()),
        ("what.mechanism", text(&e["mechanism"])),
        ("artifacts.time_fork", fork.display().to_string()),
        ("why.page_tables", "copy_page_range".into()),
        ("why.cow", "do_wp_page".into()),
        ("why.job_function", text(&e["worker_function"])),
        ("trend.faster", "threads".into()),
        ("artifacts.time_threads", threads.display().to_string()),
    ]
}

#[test]
fn reference_answers_of_two_seeds_reach_the_full_score() {
    if !require_root("reference_answers_of_two_seeds_reach_the_full_score") {
        return;
    }
    for (i, seed) in ["sched-a-1", "sched-b-2"].into_iter().enumerate() {
        let root = tempfile::tempdir().unwrap();
        // The first as the unprivileged learner through sudo, as on a
        // course server.
        let lab = match i {
            0 => LabRun::start_as_learner("2-scheduling", root.path(), seed),
            _ => LabRun::start("2-scheduling", root.path(), seed),
        };
        let answers = answers(&lab, seed, root.path());
        // The runner forks jobs: its children come and go.
        full_score(lab, &answers, "13/13", seed);
    }
}

#[test]
fn steps_show_the_learners_own_command() {
    if !require_root("steps_show_the_learners_own_command") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let mut lab = LabRun::start("2-scheduling", root.path(), "sched-c-3");
    lab.send("next");
    let seen = lab.expect("what.mechanism ");
    // The command as a shell reads it: continuation lines joined.
    let shell: Vec<&str> = seen.split_whitespace().filter(|w| *w != "\\").collect();
    let exe = env!("CARGO_BIN_EXE_kdiag");
    let want = format!(
        "{exe} time -v -o 2-scheduling-fork.txt {exe} workload run scheduling 1 --seed sched-c-3"
    );
    assert!(shell.join(" ").contains(&want), "{seen}");
    lab.send("quit");
    lab.finish();
}

#[test]
fn another_seeds_answers_fail_the_seeded_checks() {
    if !require_root("another_seeds_answers_fail_the_seeded_checks") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let mine = "sched-c-3";
    // A seed whose jobs run another function.
    let other = (0..50)
        .map(|i| format!("sched-other-{i}"))
        .find(|s| {
            expect_args("scheduling", &["1"], mine)["worker_function"]
                != expect_args("scheduling", &["1"], s)["worker_function"]
        })
        .expect("another variant");
    let mut lab = LabRun::start("2-scheduling", root.path(), mine);
    let copied = answers(&lab, &other, root.path());
    let mut wrong = answer_all(&mut lab, &copied);
    wrong.sort();
    assert_eq!(
        wrong,
        [
            "artifacts.time_fork",
            "artifacts.time_threads",
            "why.job_function"
        ],
        "the other seed's timings and function"
    );
    lab.send("quit");
    lab.finish();
}

#[test]
fn self_test_passes() {
    self_test("2-scheduling");
}
