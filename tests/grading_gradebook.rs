//! `kdiag course gradebook`: two labs graded for a class (one learner
//! missing from a lab, one not gradable) merge into one gradebook whose
//! every cell is the score the lab's own grading gave, in kdiag's CSV and
//! in Canvas's and Moodle's import layouts; a regrade lists exactly the
//! score that changed.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{kdiag, stderr, stdout};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn ok(args: &[&str]) -> (String, String) {
    let out = kdiag().args(args).output().unwrap();
    assert!(
        out.status.code().unwrap() <= 1,
        "{args:?}: {}",
        stderr(&out)
    );
    (stdout(&out), stderr(&out))
}

/// Learner `id`'s reference answers for `lab` without the profile, the
/// process name wrong when `wrong`.
fn answers(course: &Path, lab: &str, id: &str, wrong: bool) -> String {
    let (text, _) = ok(&[
        "lab",
        "solution",
        lab,
        "--course",
        s(course),
        "--learner",
        id,
    ]);
    text.lines()
        .filter(|l| !l.starts_with("profile ="))
        .map(|l| match l.starts_with("comm = ") && wrong {
            true => "comm = \"not-it\"\n".to_string(),
            false => format!("{l}\n"),
        })
        .collect()
}

/// Grade `lab`'s submissions in `subs` into `out` (JSON); learner → score
/// of the graded ones.
fn grade(
    lab: &str,
    subs: &Path,
    course: &Path,
    roster: &Path,
    out: &Path,
) -> BTreeMap<String, f64> {
    let (json, _) = ok(&[
        "grade",
        lab,
        s(subs),
        "--course",
        s(course),
        "--roster",
        s(roster),
        "--format",
        "json",
    ]);
    std::fs::write(out, &json).unwrap();
    let g: serde_json::Value = serde_json::from_str(&json).unwrap();
    g["submissions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["error"].is_null())
        .map(|r| {
            (
                r["learner"].as_str().unwrap().to_string(),
                r["score"].as_f64().unwrap(),
            )
        })
        .collect()
}

fn write(dir: &Path, id: &str, text: &str) {
    std::fs::create_dir_all(dir.join(id)).unwrap();
    std::fs::write(dir.join(id).join("answers.toml"), text).unwrap();
}

fn cell(n: Option<&f64>) -> String {
    n.map(|n| format!("{n}")).unwrap_or_default()
}

#[test]
fn graded_labs_merge_into_one_gradebook_and_a_regrade_says_what_changed() {
    let d = tempfile::tempdir().unwrap();
    let course = d.path().join("course.toml");
    ok(&[
        "course",
        "init",
        "--labs",
        "0-demo,1-io",
        "--out",
        s(&course),
    ]);
    let ids = ["a0", "a1", "a2", "a3", "a4"];
    let roster = d.path().join("roster.csv");
    std::fs::write(&roster, format!("id\n{}\n", ids.join("\n"))).unwrap();
    let (demo, io) = (d.path().join("0-demo"), d.path().join("1-io"));
    // 0-demo: a3 hands in broken TOML, a4 nothing; a1 misses the name.
    for (n, id) in ids.iter().enumerate().take(4) {
        let text = match n {
            3 => "[[[ not toml".into(),
            _ => answers(&course, "0-demo", id, n == 1),
        };
        write(&demo, id, &text);
    }
    // 1-io: everyone, a2 misses the name.
    for (n, id) in ids.iter().enumerate() {
        write(&io, id, &answers(&course, "1-io", id, n == 2));
    }
    let graded = d.path().join("graded");
    std::fs::create_dir(&graded).unwrap();
    let demo_scores = grade(
        "0-demo",
        &demo,
        &course,
        &roster,
        &graded.join("0-demo.json"),
    );
    let io_scores = grade("1-io", &io, &course, &roster, &graded.join("1-io.json"));
    assert_eq!(demo_scores.len(), 3);
    assert_eq!(io_scores.len(), 5);
    assert!(demo_scores["a1"] < demo_scores["a0"] && io_scores["a2"] < io_scores["a0"]);

    let book = |format: &str, extra: &[&str]| {
        let mut args = vec!["course", "gradebook", s(&graded), "--format", format];
        args.extend(extra);
        ok(&args)
    };
    let (csv, note) = book("csv", &[]);
    assert!(note.contains("Gradebook of 5 learners"), "{note}");
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("learner,0-demo,1-io,total,checks_versions")
    );
    for (id, line) in ids.iter().zip(lines) {
        let (a, b) = (demo_scores.get(*id), io_scores.get(*id));
        let total = a.unwrap_or(&0.0) + b.unwrap_or(&0.0);
        let want = format!("{id},{},{},{total},", cell(a), cell(b));
        assert!(line.starts_with(&want), "{line} is not {want}...");
    }
    let (canvas, _) = book("canvas", &[]);
    let mut lines = canvas.lines();
    assert_eq!(
        lines.next(),
        Some("Student,ID,SIS User ID,SIS Login ID,Section,0-demo,1-io")
    );
    assert!(lines.next().unwrap().starts_with("Points Possible,,,,,"));
    assert_eq!(
        lines.next().unwrap(),
        format!("a0,,a0,,,{},{}", demo_scores["a0"], io_scores["a0"])
    );
    let (moodle, _) = book("moodle", &[]);
    assert!(moodle.starts_with("ID number,0-demo,1-io\n"), "{moodle}");
    assert!(
        moodle.contains(&format!("\na4,,{}\n", io_scores["a4"])),
        "{moodle}"
    );

    // A regrade: a1 fixes 0-demo (and the instructor regrades).
    let old = d.path().join("gradebook.csv");
    std::fs::write(&old, &csv).unwrap();
    write(&demo, "a1", &answers(&course, "0-demo", "a1", false));
    let regraded = grade(
        "0-demo",
        &demo,
        &course,
        &roster,
        &graded.join("0-demo.json"),
    );
    let (_, note) = book("csv", &["--previous", s(&old)]);
    assert!(note.contains("Changed since"), "{note}");
    let changed: Vec<&str> = note
        .lines()
        .skip_while(|l| !l.starts_with("Changed since"))
        .skip(1)
        .map(str::trim)
        .collect();
    assert_eq!(
        changed,
        [format!(
            "learner a1, lab 0-demo: {} -> {}",
            demo_scores["a1"], regraded["a1"]
        )],
        "{note}"
    );
    // Not a grading: usage.
    let out = kdiag()
        .args(["course", "gradebook", s(&roster)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
