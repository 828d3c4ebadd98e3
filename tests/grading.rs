//! Courses, per-learner variants and grading: `kdiag course`, `lab
//! solution`, `lab submit`, `check` and `grade`. The truth of every
//! learner is recomputed from the course secret and their id; these tests
//! forge every other file a learner could hand in and expect no score to
//! move.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::{kdiag, require_root, stderr, stdout};

/// One workload at a time: every io-app run of a user shares a scratch
/// directory.
static ONE_WORKLOAD: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run(args: &[&str], cwd: &Path) -> Output {
    kdiag().args(args).current_dir(cwd).output().unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A course in `dir` and the seed of each learner of `ids`.
fn course(dir: &Path, ids: &[&str]) -> (PathBuf, BTreeMap<String, String>) {
    let file = dir.join("course.toml");
    let out = run(&["course", "init", "--out", s(&file)], dir);
    assert!(out.status.success(), "{out:?}");
    let roster = dir.join("roster.csv");
    std::fs::write(&roster, format!("id\n{}\n", ids.join("\n"))).unwrap();
    let out = run(&["course", "seeds", s(&roster), "--course", s(&file)], dir);
    assert!(out.status.success(), "{out:?}");
    let seeds: BTreeMap<String, String> = stdout(&out)
        .lines()
        .skip(1)
        .map(|l| {
            let (id, seed) = l.split_once(',').unwrap();
            (id.to_string(), seed.to_string())
        })
        .collect();
    assert_eq!(seeds.len(), ids.len());
    (file, seeds)
}

/// A learner's reference answers as `kdiag lab solution` prints them.
fn solution(course: &Path, learner: &str) -> String {
    common::lab_solution(course, learner)
}

/// The graded rows of `kdiag grade --format json`, by submission.
fn grade_json(course: &Path, subs: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "grade",
        "0-demo",
        s(subs),
        "--course",
        s(course),
        "--format",
        "json",
    ];
    args.extend(extra);
    let out = kdiag().args(&args).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn row<'a>(g: &'a serde_json::Value, sub: &str) -> &'a serde_json::Value {
    g["submissions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["submission"] == sub)
        .unwrap_or_else(|| panic!("no row {sub} in {g:#}"))
}

fn check_status<'a>(row: &'a serde_json::Value, id: &str) -> &'a str {
    row["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap()["status"]
        .as_str()
        .unwrap()
}

#[test]
fn seeds_are_per_learner_and_tokens_verify_only_with_the_course() {
    let d = tempfile::tempdir().unwrap();
    let (file, seeds) = course(d.path(), &["ada", "bob", "cy"]);
    let mode = std::os::unix::fs::MetadataExt::mode(&std::fs::metadata(&file).unwrap());
    assert_eq!(mode & 0o777, 0o600);
    let tokens: std::collections::BTreeSet<&String> = seeds.values().collect();
    assert_eq!(tokens.len(), 3, "{seeds:?}");
    for t in tokens {
        assert_eq!(t.len(), 14, "{t}");
        assert!(t.chars().enumerate().all(|(i, c)| if i == 4 || i == 9 {
            c == '-'
        } else {
            "0123456789abcdefghjkmnpqrstvwxyz".contains(c)
        }));
    }
    let ok = run(
        &[
            "course",
            "verify",
            "ada",
            &seeds["ada"],
            "--course",
            s(&file),
        ],
        d.path(),
    );
    assert_eq!(ok.status.code(), Some(0));
    let no = run(
        &[
            "course",
            "verify",
            "bob",
            &seeds["ada"],
            "--course",
            s(&file),
        ],
        d.path(),
    );
    assert_eq!(no.status.code(), Some(1));
    // A second course gives other seeds; the file is never overwritten.
    let again = run(&["course", "init", "--out", s(&file)], d.path());
    assert_eq!(again.status.code(), Some(2), "a usage error");
    assert!(stderr(&again).contains("already exists"));
    // The solution needs the course: without it there is no way to ask.
    let out = kdiag()
        .args(["lab", "solution", "0-demo", "--learner", "ada"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Answers a learner would hand in without evidence (no artifact): the
/// reference values of `learner`, with who.pid made up.
fn value_answers(course: &Path, learner: &str) -> String {
    solution(course, learner)
        .lines()
        .filter(|l| !l.starts_with("profile ="))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A learner's reference values by key (`file`, `function`, ...).
fn reference_values(course: &Path, learner: &str) -> BTreeMap<String, String> {
    solution(course, learner)
        .lines()
        .filter_map(|l| l.split_once(" = "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn each_learner_s_answers_pass_for_them_and_fail_for_another() {
    let d = tempfile::tempdir().unwrap();
    let ids = ["ada", "bob", "cy", "dee"];
    let (file, seeds) = course(d.path(), &ids);
    let subs = d.path().join("subs");
    for id in ids {
        std::fs::create_dir_all(subs.join(id)).unwrap();
        std::fs::write(subs.join(id).join("answers.toml"), value_answers(&file, id)).unwrap();
    }
    // Bob hands in Ada's answers.
    std::fs::create_dir_all(subs.join("bob-copy")).unwrap();
    std::fs::write(
        subs.join("bob-copy/answers.toml"),
        value_answers(&file, "ada"),
    )
    .unwrap();
    let roster = d.path().join("roster2.csv");
    std::fs::write(
        &roster,
        "id,folder\nada,ada\nbob,bob-copy\ncy,cy\ndee,dee\nzed,\n",
    )
    .unwrap();

    let g = grade_json(&file, &subs, &[]);
    let max = g["max_score"].as_f64().unwrap();
    for id in ids {
        let r = row(&g, id);
        // Every graded check passes but the artifact (none was handed in).
        let failed: Vec<&str> = r["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["graded"] == true && c["status"] != "passed")
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        assert_eq!(failed, ["artifacts.profile"], "{id}: {r:#}");
        assert_eq!(check_status(r, "who.pid"), "not_graded");
        assert_eq!(r["seed"].as_str(), Some(seeds[id].as_str()));
        assert!(r["score"].as_f64().unwrap() < max);
    }
    // Graded as Bob (through the roster's folder column), Ada's answers
    // fail the checks that depend on the seed.
    let g = grade_json(&file, &subs, &["--roster", s(&roster)]);
    let copy = row(&g, "bob-copy");
    assert_eq!(copy["learner"], "bob");
    let (ada, bob) = (
        reference_values(&file, "ada"),
        reference_values(&file, "bob"),
    );
    assert_ne!(ada["file"], bob["file"]);
    for (key, id) in [
        ("file", "why.file"),
        ("function", "why.function"),
        ("region_bytes", "trend.region_bytes"),
    ] {
        // Fails unless the two variants happen to agree on it.
        let expect = if ada[key] == bob[key] {
            "passed"
        } else {
            "failed"
        };
        assert_eq!(check_status(copy, id), expect, "{id}: {copy:#}");
    }
    assert_eq!(check_status(copy, "what.io_type"), "passed");
    // The folder "bob" is not Bob's in this roster, and zed handed nothing in.
    assert!(
        row(&g, "bob")["error"]
            .as_str()
            .unwrap()
            .contains("not a learner")
    );
    assert_eq!(row(&g, "zed")["error"], "no submission");
    // Five learners are too few to tell a copy from chance: no one is
    // flagged (tests/grading_copies.rs grades a class of 200).
    assert_eq!(g["suspicious"].as_array().unwrap().len(), 0, "{g:#}");
}

#[test]
fn answers_in_natural_forms_are_accepted() {
    let d = tempfile::tempdir().unwrap();
    let (file, seeds) = course(d.path(), &["ada"]);
    let reference = value_answers(&file, "ada");
    let region: u64 = reference
        .lines()
        .find_map(|l| l.strip_prefix("region_bytes = "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mib = region as f64 / 1048576.0;
    let path_of = |r: &str| -> String {
        let name = r
            .lines()
            .find_map(|l| l.strip_prefix("file = "))
            .unwrap()
            .trim_matches('"')
            .to_string();
        format!("/var/tmp/kdiag-io-app-1000/{name}")
    };
    let natural = reference
        .replace(
            &format!("region_bytes = {region}"),
            &format!("region_bytes = \"{mib} MiB\""),
        )
        .replace("syscall = \"__x64_sys_write\"", "syscall = \"ksys_write\"")
        .replace(
            &format!(
                "file = \"{}\"",
                path_of(&reference).rsplit('/').next().unwrap()
            ),
            &format!("file = \"{}\"", path_of(&reference)),
        );
    assert_ne!(natural, reference);
    let answers = d.path().join("answers.toml");
    std::fs::write(&answers, natural).unwrap();
    let out = kdiag()
        .args([
            "check",
            "0-demo",
            "--answers",
            s(&answers),
            "--seed",
            &seeds["ada"],
        ])
        .args(["--format", "json"])
        .output()
        .unwrap();
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for id in ["trend.region_bytes", "why.syscall", "why.file"] {
        assert_eq!(check_status(&j, id), "passed", "{id}: {j:#}");
    }
}

#[test]
fn every_format_is_valid_for_a_missing_or_broken_submission() {
    let d = tempfile::tempdir().unwrap();
    let (file, seeds) = course(d.path(), &["ada"]);
    let broken = d.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    std::fs::write(broken.join("answers.toml"), "[who\n").unwrap();
    let big = d.path().join("big.tar");
    std::fs::write(&big, vec![0u8; 65 << 20]).unwrap();
    for sub in [d.path().join("nothing-here"), broken, big] {
        for format in ["gradescope", "prairielearn", "junit", "json", "text"] {
            let out = kdiag()
                .args([
                    "check",
                    "0-demo",
                    "--submission",
                    s(&sub),
                    "--seed",
                    &seeds["ada"],
                ])
                .args(["--format", format])
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(2), "{format}: {out:?}");
            let text = stdout(&out);
            match format {
                "gradescope" => {
                    let g: serde_json::Value = serde_json::from_str(&text).unwrap();
                    assert_eq!(g["score"], 0.0);
                    assert!(g["output"].as_str().unwrap().len() > 10, "{g}");
                    assert!(g["tests"].is_array());
                }
                "prairielearn" => {
                    let p: serde_json::Value = serde_json::from_str(&text).unwrap();
                    assert_eq!(p["gradable"], false);
                    assert!(p["message"].as_str().unwrap().len() > 10, "{p}");
                }
                "junit" => {
                    let doc = roxmltree::Document::parse(&text).unwrap();
                    let case = doc
                        .descendants()
                        .find(|n| n.has_tag_name("testcase"))
                        .unwrap();
                    let err = case.children().find(|n| n.has_tag_name("error")).unwrap();
                    assert!(err.attribute("message").unwrap().len() > 10, "{text}");
                }
                "json" => {
                    let j: serde_json::Value = serde_json::from_str(&text).unwrap();
                    assert_eq!(
                        (j["gradable"].as_bool(), j["score"].as_f64()),
                        (Some(false), Some(0.0))
                    );
                }
                _ => assert!(
                    text.starts_with(&format!(
                        "For lab 0-demo, seed {}.\nChecks version ",
                        seeds["ada"]
                    )) && text.contains(".\ncannot grade: "),
                    "{text}"
                ),
            }
        }
    }
    // The same through kdiag grade, for one learner's autograder run.
    let out = kdiag()
        .args([
            "grade",
            "0-demo",
            s(&d.path().join("missing")),
            "--course",
            s(&file),
        ])
        .args(["--learner", "ada", "--format", "gradescope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let g: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(g["score"], 0.0);
}

#[test]
fn answer_works_from_any_directory_and_the_state_is_per_user() {
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("state");
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(a.join("trace.folded"), "io-app;x 1\n").unwrap();
    let answer = |cwd: &Path, key: &str, value: &str| {
        let out = kdiag()
            .args(["answer", "0-demo", key, value])
            .env("XDG_STATE_HOME", &state)
            .current_dir(cwd)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    answer(&a, "who.comm", "io-app");
    answer(&b, "what.sync", "yes");
    answer(&a, "artifacts.profile", "trace.folded");
    let file = state.join("kdiag/labs/0-demo/answers.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("comm = \"io-app\"") && text.contains("sync = \"yes\""),
        "{text}"
    );
    // An evidence file is recorded by its full path.
    assert!(
        text.contains(&format!("{}", a.join("trace.folded").display())),
        "{text}"
    );
    assert!(!a.join("kdiag-labs").exists() && !b.join("kdiag-labs").exists());
}

/// The privileged half: reference submissions made by really running the
/// lab's workload and instruments.
#[test]
fn reference_submissions_earn_full_marks_the_same_way_everywhere() {
    if !require_root("reference_submissions_earn_full_marks_the_same_way_everywhere") {
        return;
    }
    let _one = ONE_WORKLOAD.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let (file, mut seeds) = course(d.path(), &["ada"]);
    // Bob: a learner whose variant differs from Ada's in every seeded
    // answer (two variants share a function name one time in 16).
    let seeded = |learner: &str| -> Vec<String> {
        solution(&file, learner)
            .lines()
            .filter(|l| {
                ["file = ", "function = ", "region_bytes = "]
                    .iter()
                    .any(|k| l.starts_with(k))
            })
            .map(str::to_string)
            .collect()
    };
    let ada = seeded("ada");
    let bob = (0..50)
        .map(|n| format!("bob{n}"))
        .find(|b| seeded(b).iter().zip(&ada).all(|(x, y)| x != y))
        .unwrap();
    let out = run(
        &[
            "course",
            "seeds",
            s(&{
                let r = d.path().join("bob.csv");
                std::fs::write(&r, format!("id\n{bob}\n")).unwrap();
                r
            }),
            "--course",
            s(&file),
        ],
        d.path(),
    );
    let bob_seed = stdout(&out)
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .nth(1)
        .unwrap()
        .to_string();
    seeds.insert("bob".into(), bob_seed);
    let ids = ["ada", bob.as_str()];
    let subs = d.path().join("subs");
    for id in ids {
        let out = kdiag()
            .args([
                "lab",
                "solution",
                "0-demo",
                "--course",
                s(&file),
                "--learner",
                id,
            ])
            .args(["--out", s(&subs.join(id))])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let g = grade_json(&file, &subs, &[]);
    let max = g["max_score"].as_f64().unwrap();
    for id in ids {
        assert_eq!(
            row(&g, id)["score"].as_f64(),
            Some(max),
            "{:#}",
            row(&g, id)
        );
    }
    assert_eq!(g["suspicious"].as_array().unwrap().len(), 0, "{g:#}");

    // check from inside the submission, grade from elsewhere: same score.
    let ada = subs.join("ada");
    let by_check = kdiag()
        .args([
            "check",
            "0-demo",
            "--answers",
            "answers.toml",
            "--seed",
            &seeds["ada"],
        ])
        .args(["--format", "json"])
        .current_dir(&ada)
        .output()
        .unwrap();
    let c: serde_json::Value = serde_json::from_slice(&by_check.stdout).unwrap();
    assert_eq!(c["score"].as_f64(), Some(max), "{c:#}");
    assert_eq!(by_check.status.code(), Some(0));

    // Forge everything a learner could add besides answers and evidence:
    // a session with another truth, progress notes, a manifest claiming
    // Bob's seed, stray files. Ada's score does not move (the other seed is
    // reported); Bob's answers under a manifest naming Ada stay wrong for
    // Ada; and a manifest naming Bob in Ada's folder is not gradable.
    let forged = d.path().join("forged");
    let ada_manifest = std::fs::read_to_string(subs.join("ada/manifest.toml")).unwrap();
    let bob_seed = &seeds["bob"];
    for (name, from, manifest) in [
        ("ada", "ada", ada_manifest.replace(&seeds["ada"], bob_seed)),
        ("ada-with-bobs", bob.as_str(), ada_manifest.clone()),
        (
            "bob-in-adas",
            bob.as_str(),
            std::fs::read_to_string(subs.join(&bob).join("manifest.toml")).unwrap(),
        ),
    ] {
        let dir = forged.join(name);
        std::fs::create_dir_all(dir.join("artifacts")).unwrap();
        for f in ["answers.toml", "artifacts/0-demo-profile.folded"] {
            std::fs::copy(subs.join(from).join(f), dir.join(f)).unwrap();
        }
        std::fs::write(dir.join("manifest.toml"), manifest).unwrap();
        std::fs::write(
            dir.join("session.json"),
            r#"{"seed": "x", "pid": 1, "truth": {}}"#,
        )
        .unwrap();
        std::fs::write(
            dir.join("progress.toml"),
            "seed = \"x\"\ndone = [\"who\"]\n",
        )
        .unwrap();
        std::fs::write(dir.join("expect.json"), r#"{"file": "x"}"#).unwrap();
    }
    // Ada's folder holds her work and a copy of Bob's work that claims to
    // be hers; "bob-in-adas" is Bob's own bundle in a folder the roster
    // gives Ada.
    let roster = d.path().join("forged-roster.csv");
    std::fs::write(
        &roster,
        format!("id,folder\nada,ada\n{bob},bob-in-adas-is-not-his\n"),
    )
    .unwrap();
    let g = grade_json(&file, &forged, &["--roster", s(&roster)]);
    let r = row(&g, "ada");
    assert_eq!(r["score"].as_f64(), Some(max), "{g:#}");
    assert!(
        r["warnings"][0]
            .as_str()
            .unwrap()
            .contains(&format!("made with seed {bob_seed}")),
        "{r:#}"
    );
    // The other seed is no other graded learner's here: a warning, no flag.
    assert_eq!(g["suspicious"].as_array().unwrap().len(), 0, "{g:#}");
    let refused = row(&g, "bob-in-adas");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains(&format!("manifest names learner \"{bob}\"")),
        "{refused:#}"
    );
    // Graded as Ada (her manifest, her folder), Bob's work fails what
    // depends on the seed.
    let roster2 = d.path().join("forged-roster2.csv");
    std::fs::write(&roster2, format!("id,folder\nada,ada-with-bobs\n{bob},x\n")).unwrap();
    let g = grade_json(&file, &forged, &["--roster", s(&roster2)]);
    let r = row(&g, "ada-with-bobs");
    assert_eq!(r["learner"], "ada", "{r:#}");
    assert!(r["score"].as_f64().unwrap() < max, "{r:#}");
    assert_eq!(check_status(r, "artifacts.profile"), "failed");
    assert_eq!(check_status(r, "why.file"), "failed");

    // The self-test: empty answers fail every graded check, the reference
    // passes them.
    let out = kdiag()
        .args(["check", "0-demo", "--self-test"])
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

#[test]
fn gradescope_s_container_names_the_learner_through_its_metadata() {
    let d = tempfile::tempdir().unwrap();
    let (file, _) = course(d.path(), &["ada@example.org"]);
    // /autograder: submission/ and submission_metadata.json beside it.
    let autograder = d.path().join("autograder");
    let sub = autograder.join("submission");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(
        sub.join("answers.toml"),
        value_answers(&file, "ada@example.org"),
    )
    .unwrap();
    std::fs::write(
        autograder.join("submission_metadata.json"),
        r#"{"id": 1, "users": [{"email": "Ada@Example.org", "name": "Ada", "sid": ""}]}"#,
    )
    .unwrap();
    let out = kdiag()
        .args([
            "grade",
            "0-demo",
            s(&sub),
            "--course",
            s(&file),
            "--format",
            "gradescope",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "the artifact is missing: {out:?}"
    );
    let g: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tests = g["tests"].as_array().unwrap();
    let failed: Vec<&str> = tests
        .iter()
        .filter(|t| t["status"] == "failed")
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed.len(), 1, "only the evidence is missing: {g:#}");
    let max: f64 = tests.iter().map(|t| t["max_score"].as_f64().unwrap()).sum();
    assert!(g["score"].as_f64().unwrap() > 0.0 && g["score"].as_f64().unwrap() < max);
    // Another learner's metadata: the same answers are wrong for them.
    std::fs::write(
        autograder.join("submission_metadata.json"),
        r#"{"id": 2, "users": [{"email": "bob@example.org"}]}"#,
    )
    .unwrap();
    let out = kdiag()
        .args([
            "grade",
            "0-demo",
            s(&sub),
            "--course",
            s(&file),
            "--format",
            "gradescope",
        ])
        .output()
        .unwrap();
    let b: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(b["score"].as_f64() < g["score"].as_f64(), "{b:#}");
}

/// Under sudo the learner's files are the invoker's: in their state
/// directory, never root's, and created with their identity.
#[test]
fn under_sudo_the_state_is_the_invoker_s() {
    if !require_root("under_sudo_the_state_is_the_invoker_s") {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::os::unix::fs::chown(&state, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(
        d.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let sudo = |cmd: &mut std::process::Command| {
        cmd.env("SUDO_UID", "65534")
            .env("SUDO_GID", "65534")
            .env("HOME", "/root")
            .args(["answer", "0-demo", "who.comm", "io-app"])
            .output()
            .unwrap()
    };
    let out = sudo(kdiag().env("XDG_STATE_HOME", &state));
    assert!(out.status.success(), "{out:?}");
    let file = state.join("kdiag/labs/0-demo/answers.toml");
    assert_eq!(std::fs::metadata(&file).unwrap().uid(), 65534);
    // Without XDG_STATE_HOME: the invoker's home from the password
    // database (nobody's is /nonexistent), not root's $HOME.
    let out = sudo(kdiag().env_remove("XDG_STATE_HOME"));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("/nonexistent/.local/state/kdiag"),
        "{}",
        stderr(&out)
    );
}
