//! Identity that matches the roster: seeds handed out by an LMS export's
//! student id, a bundle whose manifest names the learner's login. With
//! `--roster` it is graded as the student id's learner, against their
//! seed; without it kdiag cannot tell whose seed it is and says to pass
//! the roster, never grading it against another seed silently. A learner
//! the roster does not know is reported as such.

mod common;

use common::*;

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_login_named_submission_is_graded_through_the_roster_or_not_at_all() {
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n);
    let ok = |args: &[&str], env: Option<&str>| {
        let mut c = kdiag();
        c.args(args);
        if let Some(seed) = env {
            c.env("KDIAG_SEED", seed);
        }
        let out = c.output().unwrap();
        assert!(
            out.status.code().unwrap() <= 1,
            "{args:?}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        stdout(&out)
    };
    ok(
        &[
            "course",
            "init",
            "--labs",
            "0-demo",
            "--out",
            s(&p("course.toml")),
        ],
        None,
    );
    std::fs::write(
        p("roster.csv"),
        "student_id,name,email,login\n3001,Ada,ada@example.org,ada\n3002,Bob,bob@example.org,bob\n",
    )
    .unwrap();
    let seeds = ok(
        &[
            "course",
            "seeds",
            s(&p("roster.csv")),
            "--course",
            s(&p("course.toml")),
        ],
        None,
    );
    assert!(
        seeds.starts_with("id,seed\n3001,"),
        "keyed by student_id: {seeds}"
    );
    let seed = seeds
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .nth(1)
        .unwrap()
        .to_string();
    std::fs::create_dir(p("subs")).unwrap();
    for learner in ["ada", "zed"] {
        let dir = p(&format!("own-{learner}"));
        ok(
            &["answer", "0-demo", "who.comm", "io-app", "--dir", s(&dir)],
            None,
        );
        let out = p(&format!("subs/kdiag-0-demo-{learner}.tar"));
        ok(
            &[
                "lab",
                "submit",
                "0-demo",
                "--learner",
                learner,
                "--out",
                s(&out),
                "--dir",
                s(&dir),
            ],
            Some(&seed),
        );
    }
    let grade = |extra: &[&str]| -> serde_json::Value {
        let out = kdiag()
            .args([
                "grade",
                "0-demo",
                s(&p("subs")),
                "--course",
                s(&p("course.toml")),
            ])
            .args(["--format", "json"])
            .args(extra)
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)))
    };
    let row = |doc: &serde_json::Value, name: &str| {
        doc["submissions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["submission"] == name)
            .unwrap_or_else(|| panic!("{name}: {doc:#}"))
            .clone()
    };
    let doc = grade(&[]);
    let ada = row(&doc, "kdiag-0-demo-ada");
    let e = ada["error"].as_str().unwrap();
    assert!(
        e.contains("not the course seed of learner \"ada\"") && e.contains("--roster"),
        "{e}"
    );
    let doc = grade(&["--roster", s(&p("roster.csv"))]);
    let ada = row(&doc, "kdiag-0-demo-ada");
    assert!(ada["error"].is_null(), "{ada:#}");
    assert_eq!(
        (ada["learner"].as_str(), ada["seed"].as_str()),
        (Some("3001"), Some(seed.as_str()))
    );
    assert_eq!(ada["score"], 1.0, "{ada:#}");
    let zed = row(&doc, "kdiag-0-demo-zed");
    assert!(
        zed["error"].as_str().unwrap().contains("not in the roster"),
        "{zed:#}"
    );
    // The roster's columns chosen by flag: ids by email.
    let doc = grade(&["--roster", s(&p("roster.csv")), "--id-column", "email"]);
    let ada = row(&doc, "kdiag-0-demo-ada");
    assert_eq!(ada["learner"], "ada@example.org", "{ada:#}");
}
