//! Lab 0-demo (io-app): endless synchronous writes rewriting one region of
//! a file. Played by the unprivileged learner through sudo from a script
//! with no terminal at all, its replies through `| tee log`. (Its
//! self-test: tests/grading.rs.)

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;

use crate::common::lab_run::LabRun;
use crate::common::stdout;
use crate::course_common::{expect, full_score, save_evidence, text};

/// The TYPE most of `pid`'s requests have in `sudo kdiag iosnoop -p PID 2`,
/// as step 2 has the learner read it.
fn io_type_shown(lab: &LabRun, pid: u64) -> String {
    let out = lab
        .kdiag()
        .args(["iosnoop", "-p", &pid.to_string(), "2"])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let rows = stdout(&out);
    let mut types: HashMap<&str, usize> = HashMap::new();
    for row in rows.lines().skip(1) {
        // COMM PID TYPE ...
        let f: Vec<&str> = row.split_whitespace().collect();
        if f.get(1) == Some(&pid.to_string().as_str()) {
            *types.entry(f[2]).or_default() += 1;
        }
    }
    let most = types.iter().max_by_key(|(_, n)| **n);
    most.map(|(t, _)| t.to_string())
        .unwrap_or_else(|| panic!("no request of {pid} in\n{rows}"))
}

/// The lab's answers: the request type as iosnoop shows it, the rest from
/// `seed`'s truth; the evidence made as step 3 says.
fn answers(lab: &LabRun, seed: &str, root: &Path) -> Vec<(&'static str, String)> {
    let e = expect("io-app", seed);
    let pid = lab.pid();
    let io_type = io_type_shown(lab, pid);
    assert_eq!(io_type, text(&e["io_type"]), "{seed}: iosnoop's TYPE");
    let folded = root.join("0-demo-profile.folded");
    let args = ["profile", "-p", &pid.to_string(), "-d", "5", "--folded"];
    save_evidence(lab, &args, &folded);
    vec![
        ("who.pid", pid.to_string()),
        ("who.comm", "io-app".into()),
        ("what.io_type", io_type),
        ("what.sync", "yes".into()),
        ("why.syscall", text(&e["syscall"])),
        ("why.function", text(&e["write_function"])),
        ("why.file", text(&e["file"])),
        ("artifacts.profile", folded.display().to_string()),
        ("trend.pattern", text(&e["pattern"])),
        ("trend.region_bytes", text(&e["region_bytes"])),
    ]
}

#[test]
fn the_learner_scripting_it_through_tee_reaches_the_full_score() {
    if !crate::common::require_root("the_learner_scripting_it_through_tee_reaches_the_full_score") {
        return;
    }
    let seed = "demo-tee-1";
    let root = tempfile::tempdir().unwrap();
    let log = root.path().join("lab.log");
    let lab = LabRun::start_as_learner_through_tee("0-demo", root.path(), seed, &log);
    let tee = lab.tee;
    let scratch = crate::common::scratch_of(lab.pid());
    let answers = answers(&lab, seed, root.path());
    full_score(lab, &answers, "15/15", seed);
    assert!(!scratch.exists(), "{} is removed", scratch.display());
    // Reopened, the finished lab is finished (its live check, against a
    // new PID, counts as it did) and leaving it exits 0.
    let mut again = LabRun::start_as_learner("0-demo", root.path(), seed);
    again.send("status");
    let seen = again.expect("steps done");
    assert!(
        seen.contains("score 15/15 points, 4/4 steps done"),
        "{seen}"
    );
    again.send("quit");
    assert_eq!(again.finish(), 0, "a finished lab exits 0");
    // What the script saw is in the log too, to the end.
    if tee {
        let logged = std::fs::read_to_string(&log).unwrap();
        assert!(
            logged.contains("-- Step 1/4") && logged.contains("score 15/15 points, 4/4 steps done"),
            "the log:\n{logged}"
        );
    }
}
