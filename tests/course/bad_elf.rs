//! Lab 5-bad-elf (bad-elf as a service): a launcher restarts a program the
//! kernel kills after the point of no return of its execve.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::lab_run::LabRun;
use crate::common::{kdiag, require_root, stdout};
use crate::course_common::{answer_all, expect, full_score, self_test, text};

/// `sudo kdiag exec-trace -p PID` for long enough to see one attempt (the
/// launcher starts one every 2 s), stopped with Ctrl-C as a learner would.
fn exec_trace(pid: u64) -> String {
    let child = kdiag()
        .args(["exec-trace", "-p", &pid.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2600));
    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    stdout(&child.wait_with_output().unwrap())
}

/// What the instruments show of `seed`'s lab (the launcher `pid`) is its
/// truth: exec-trace the errno, the signal, its si_code and its sender;
/// elf-check on the traced file the program header and the rule.
fn instruments_show_the_truth(seed: &str, pid: u64) {
    let e = expect("bad-elf", seed);
    let trace = exec_trace(pid);
    for want in [
        text(&e["errno"]),
        format!(
            "{} (11) si_code {}",
            text(&e["signal"]),
            text(&e["si_code"])
        ),
        "force_fatal_sig".into(),
        "bprm_execve".into(),
    ]
    .iter()
    {
        assert!(
            trace.contains(want.as_str()),
            "{seed}: {want} not in\n{trace}"
        );
    }
    // The service's file, from the trace's execve line.
    let at = trace.find("execve(\"").expect("an execve") + "execve(\"".len();
    let file = &trace[at..at + trace[at..].find('"').unwrap()];
    let out = kdiag().args(["elf-check", file]).output().unwrap();
    let report = stdout(&out);
    let want = format!("ERROR {} (program header {})", text(&e["rule"]), e["phdr"]);
    assert!(report.contains(&want), "{seed}: {want} not in\n{report}");
}

/// The lab's answers for `seed`'s truth.
fn answers(lab: &LabRun, seed: &str) -> Vec<(&'static str, String)> {
    let e = expect("bad-elf", seed);
    vec![
        ("who.pid", lab.pid().to_string()),
        ("who.comm", "bad-elf".into()),
        ("what.errno", text(&e["errno"])),
        ("what.signal", text(&e["signal"])),
        ("what.si_code", text(&e["si_code"])),
        ("why.function", "force_fatal_sig".into()),
        ("why.phdr", text(&e["phdr"])),
        ("why.rule", text(&e["rule"])),
        ("fix.field", text(&e["fix_fields"][0])),
        ("fix.program_can_catch", "no".into()),
    ]
}

#[test]
fn reference_answers_of_two_seeds_reach_the_full_score() {
    if !require_root("reference_answers_of_two_seeds_reach_the_full_score") {
        return;
    }
    // Two seeds whose files are broken in different ways.
    let seeds = ["elf-a-1", "elf-b-4"];
    for (i, seed) in seeds.into_iter().enumerate() {
        let root = tempfile::tempdir().unwrap();
        // The first as the unprivileged learner through sudo, as on a
        // course server.
        let lab = match i {
            0 => LabRun::start_as_learner("5-bad-elf", root.path(), seed),
            _ => LabRun::start("5-bad-elf", root.path(), seed),
        };
        let pid = lab.pid();
        instruments_show_the_truth(seed, pid);
        let answers = answers(&lab, seed);
        full_score(lab, &answers, "14/14", seed);
        // Nothing left behind: no scratch directory of that run.
        let left = Command::new("sh")
            .arg("-c")
            .arg(format!("ls -d /tmp/kdiag-*/bad-elf-{pid} /run/user/*/kdiag-workloads/bad-elf-{pid} 2>/dev/null"))
            .output()
            .unwrap();
        assert_eq!(stdout(&left), "", "{seed}: scratch directory left");
    }
}

#[test]
fn another_seeds_answers_fail_the_seeded_checks() {
    if !require_root("another_seeds_answers_fail_the_seeded_checks") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let mine = "elf-b-3";
    // A seed whose file is broken another way, in another program header.
    let other = (0..50)
        .map(|i| format!("elf-other-{i}"))
        .find(|s| {
            let (a, b) = (expect("bad-elf", mine), expect("bad-elf", s));
            let fix = |v: &serde_json::Value| v["fix_fields"].as_array().unwrap().clone();
            a["phdr"] != b["phdr"] && a["errno"] != b["errno"] && !fix(&a).contains(&fix(&b)[0])
        })
        .expect("another variant");
    let mut lab = LabRun::start("5-bad-elf", root.path(), mine);
    let mut copied = answers(&lab, &other);
    // The PID is the running workload's either way.
    copied[0].1 = lab.pid().to_string();
    let mut wrong = answer_all(&mut lab, &copied);
    wrong.sort();
    for key in ["what.errno", "why.phdr", "why.rule", "fix.field"] {
        assert!(wrong.contains(&key.to_string()), "{key}: {wrong:?}");
    }
    lab.send("quit");
    lab.finish();
}

#[test]
fn self_test_passes() {
    self_test("5-bad-elf");
}
