//! Attempts on a learner's own machine: `kdiag check` of the learner's own
//! answers counts each answered question in the lab's folder, `lab
//! submit` writes the counts into the bundle's manifest, and `grade` shows
//! them per question in every format (unattested: the learner could edit
//! them) and per check in `--summary`. Checking a submission counts
//! nothing. (A course server's journal and its limit: grading_attested.rs.)

mod common;

use std::path::Path;

use common::{kdiag, stderr, stdout};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = kdiag().args(args).output().unwrap();
    assert!(
        out.status.code().unwrap() <= 1,
        "{args:?}: {}",
        stderr(&out)
    );
    stdout(&out)
}

#[test]
fn attempts_are_counted_bundled_and_shown_per_question_in_every_format() {
    let d = tempfile::tempdir().unwrap();
    let course = d.path().join("course.toml");
    ok(&["course", "init", "--labs", "0-demo", "--out", s(&course)]);
    let roster = d.path().join("roster.csv");
    std::fs::write(&roster, "id\nada\n").unwrap();
    let seeds = ok(&["course", "seeds", s(&roster), "--course", s(&course)]);
    let seed = seeds.lines().nth(1).unwrap().split(',').nth(1).unwrap();
    let labs = d.path().join("labs");
    let own = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--dir", s(&labs)]);
        ok(&all)
    };
    // An attempt is a new answer: checking it again, alone or with its
    // step, counts nothing; answering anew (even the earlier answer) does.
    own(&["answer", "0-demo", "who.comm", "io-app"]);
    for _ in 0..4 {
        own(&["check", "0-demo", "--seed", seed, "--only", "who.comm"]);
        own(&["check", "0-demo", "--seed", seed]);
    }
    let counted = std::fs::read_to_string(labs.join("0-demo/attempts.toml")).unwrap();
    assert!(counted.contains("\"who.comm\" = 1"), "{counted}");
    for answer in ["bash", "io-app"] {
        own(&["answer", "0-demo", "who.comm", answer]);
        let out = own(&["check", "0-demo", "--seed", seed]);
        assert!(
            out.contains("counted on your machine, not attested"),
            "{out}"
        );
        own(&["check", "0-demo", "--seed", seed, "--only", "who.comm"]);
    }
    let counted = std::fs::read_to_string(labs.join("0-demo/attempts.toml")).unwrap();
    assert!(counted.contains("\"who.comm\" = 3"), "{counted}");
    assert!(
        !counted.contains("why.file"),
        "unanswered costs nothing: {counted}"
    );

    let bundle = d.path().join("subs/kdiag-0-demo-ada.tar");
    std::fs::create_dir(bundle.parent().unwrap()).unwrap();
    let out = kdiag()
        .args([
            "lab",
            "submit",
            "0-demo",
            "--learner",
            "ada",
            "--out",
            s(&bundle),
        ])
        .args(["--dir", s(&labs)])
        .env("KDIAG_SEED", seed)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // Checking the bundle (as an instructor would) shows the counts and
    // adds none.
    let checked = ok(&[
        "check",
        "0-demo",
        "--submission",
        s(&bundle),
        "--seed",
        seed,
    ]);
    assert!(checked.contains("[attempts: 3]"), "{checked}");
    assert_eq!(
        std::fs::read_to_string(labs.join("0-demo/attempts.toml")).unwrap(),
        counted
    );

    let grade = |format: &str| {
        ok(&[
            "grade",
            "0-demo",
            s(&bundle),
            "--course",
            s(&course),
            "--format",
            format,
        ])
    };
    let j: serde_json::Value = serde_json::from_str(&grade("json")).unwrap();
    let attempts = |id: &str| {
        j["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap()["attempts"]
            .as_u64()
    };
    assert_eq!(
        (
            attempts("who.comm"),
            attempts("why.file"),
            attempts("who.pid")
        ),
        (Some(3), Some(0), None)
    );
    let lines: Vec<&str> = j["attestation"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        lines.contains(
            &"attempts per question (counted on the learner's machine, not attested): who.comm 3"
        ),
        "{lines:?}"
    );
    let text = grade("text");
    let line = text
        .lines()
        .find(|l| l.starts_with("ok   who.comm "))
        .unwrap();
    assert!(line.ends_with("[attempts: 3]"), "{text}");
    let g: serde_json::Value = serde_json::from_str(&grade("gradescope")).unwrap();
    let by_extra: Vec<u64> = g["tests"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["extra_data"]["attempts"].as_u64())
        .collect();
    assert!(by_extra.contains(&3), "{g}");
    let p: serde_json::Value = serde_json::from_str(&grade("prairielearn")).unwrap();
    let t = p["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["description"] == "who.comm")
        .unwrap();
    assert!(
        t["message"].as_str().unwrap().ends_with("attempts: 3"),
        "{t}"
    );
    let x = grade("junit");
    let doc = roxmltree::Document::parse(&x).unwrap();
    let case = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase") && n.attribute("name") == Some("who.comm"))
        .unwrap();
    let prop = case
        .descendants()
        .find(|n| n.attribute("name") == Some("attempts"))
        .unwrap();
    assert_eq!(prop.attribute("value"), Some("3"), "{x}");

    // The class at a glance: attempts per check.
    let summary = ok(&[
        "grade",
        "0-demo",
        s(bundle.parent().unwrap()),
        "--course",
        s(&course),
        "--summary",
    ]);
    let row = summary.lines().find(|l| l.contains(" who.comm ")).unwrap();
    assert!(row.ends_with("attempts: mean 3, most 3"), "{summary}");
    let row = summary.lines().find(|l| l.contains(" why.file ")).unwrap();
    assert!(row.ends_with("attempts: mean 0, most 0"), "{summary}");
}
