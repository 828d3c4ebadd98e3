//! What every lab's test does: the truth of a seed, answering a whole lab,
//! the self-test.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::lab_run::{LabRun, one_workload, pid_alive};
use crate::common::{kdiag, stderr, stdout};

/// `kdiag workload describe WORKLOAD --seed SEED`'s `expect` part.
pub fn expect(workload: &str, seed: &str) -> Value {
    expect_args(workload, &[], seed)
}

/// The same for a workload that takes arguments (the lab's `workload_args`).
pub fn expect_args(workload: &str, args: &[&str], seed: &str) -> Value {
    let out = kdiag()
        .args(["workload", "describe", "--seed", seed, workload])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["expect"].clone()
}

/// A fact as an answer: strings as they are, numbers as written.
pub fn text(v: &Value) -> String {
    v.as_str().map_or(v.to_string(), str::to_string)
}

/// Give every answer; the keys kdiag said "not yet" to.
pub fn answer_all(lab: &mut LabRun, answers: &[(&str, String)]) -> Vec<String> {
    let mut wrong = Vec::new();
    for (key, value) in answers {
        let reply = lab.reply(key, value);
        if !reply.starts_with(&format!("right: {key}")) {
            assert!(reply.starts_with("not yet: "), "{key} = {value}: {reply}");
            // A "not yet" never gives the answer away.
            assert!(
                !reply.contains(value.as_str()) || value.len() < 3,
                "{reply}"
            );
            wrong.push(key.to_string());
        }
    }
    wrong
}

/// `kdiag ARGS FILE` run as the player runs the step's command that saves
/// evidence (`sudo kdiag profile -p PID -d 5 --folded FILE`).
pub fn save_evidence(lab: &LabRun, args: &[&str], file: &Path) {
    let ok = lab
        .kdiag()
        .args(args)
        .arg(file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(ok.success(), "kdiag {args:?} {}", file.display());
}

/// `kdiag time -v -o FILE kdiag workload run ARGS...` as a step tells the
/// learner to run it; FILE.
pub fn time_workload(lab: &LabRun, root: &Path, file: &str, args: &[&str]) -> PathBuf {
    let path = root.join(file);
    let exe = env!("CARGO_BIN_EXE_kdiag");
    let out = lab
        .kdiag()
        .args(["time", "-v", "-o"])
        .arg(&path)
        .args([exe, "workload", "run"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    path
}

/// Every hint of every step asked for first (`next` between steps), then
/// every answer right, then quit: no "not yet", the full `score`
/// ("14/14"), no panel or key of the app named in any step or hint, kdiag
/// exits 0 (left with `quit`, or Ctrl-C by the learner) and the workload
/// `pid` is stopped.
pub fn full_score(mut lab: LabRun, answers: &[(&str, String)], score: &str, seed: &str) {
    let pid = lab.pid();
    // Five questions at most in a step: the sixth hint says there are no
    // more. `status` ends with the score: all replies read by then.
    for _ in 0..4 {
        for _ in 0..6 {
            lab.send("hint");
        }
        lab.send("next");
    }
    lab.send("status");
    lab.expect("score ");
    assert_eq!(
        answer_all(&mut lab, answers),
        Vec::<String>::new(),
        "{seed}"
    );
    let seen = lab.expect("score ");
    assert!(
        seen.contains(&format!("score {score} points, 4/4 steps done")),
        "{seen}"
    );
    // Plain mode has no panels, and its texts and hints say so.
    let said = lab.transcript.borrow().clone();
    // Each step's part of the transcript, from its heading on.
    let steps: Vec<&str> = said.split("\n-- Step ").skip(1).collect();
    assert_eq!(steps.len(), 4, "{said}");
    for step in steps {
        assert!(
            step.contains("Hint: ") && step.contains("No more hints for this step."),
            "every hint of the step asked for:\n{step}"
        );
    }
    for app_only in ["panel", "↑", "Enter"] {
        assert!(
            !said.contains(app_only),
            "plain mode names the app's {app_only:?}:\n{said}"
        );
    }
    // The learner leaves with Ctrl-C (sudo passes it on), as quit does; a
    // script ends its input with quit.
    match lab.learner && !lab.tee {
        // SAFETY: kill(2) on our own child, sudo.
        true => unsafe { libc::kill(lab.child.id() as i32, libc::SIGINT) },
        false => {
            lab.send("quit");
            0
        }
    };
    assert_eq!(lab.finish(), 0, "every step done");
    assert!(!pid_alive(pid), "the workload is stopped");
}

/// `kdiag check LAB --self-test` passes: every graded check fails on empty
/// answers and passes on the reference, for sample seeds.
pub fn self_test(lab: &str) {
    // It runs the workload to make the artifacts: not while a lab runs one.
    let _one = one_workload();
    let out = kdiag()
        .args(["check", lab, "--self-test"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stdout(&out).contains("Passed"), "{}", stdout(&out));
}
