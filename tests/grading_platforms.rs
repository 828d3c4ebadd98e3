//! The Gradescope and PrairieLearn recipes of docs/instructor.md, run as
//! written (their paths moved under a temporary folder): an honest bundle,
//! made by `kdiag lab submit` under the name it gives, earns full marks and
//! names its learner and seed; a borrowed bundle with a forged metadata
//! file inside is refused. And what a class folder says about its entries.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{kdiag, stderr, stdout};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    stdout(&out)
}

/// A course whose roster is keyed by student id, with emails beside.
struct Class {
    dir: tempfile::TempDir,
    course: PathBuf,
    roster: PathBuf,
}

const ROSTER: &str = "id,email,name\n1234,ada@example.org,Ada\n5678,bob@example.org,Bob\n";

impl Class {
    fn new() -> Class {
        let dir = tempfile::tempdir().unwrap();
        let course = dir.path().join("course.toml");
        ok(kdiag()
            .args(["course", "init", "--labs", "0-demo", "--out", s(&course)])
            .output()
            .unwrap());
        let roster = dir.path().join("roster.csv");
        std::fs::write(&roster, ROSTER).unwrap();
        Class {
            dir,
            course,
            roster,
        }
    }

    fn seed(&self, id: &str) -> String {
        let seeds = ok(kdiag()
            .args([
                "course",
                "seeds",
                s(&self.roster),
                "--course",
                s(&self.course),
            ])
            .output()
            .unwrap());
        seeds
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{id},")))
            .unwrap()
            .to_string()
    }

    /// Learner `id`'s honest bundle, made as a learner makes it: answers
    /// (the reference values, an evidence file with what the profile
    /// shows) in their lab folder, then `kdiag lab submit` run in `cwd`.
    /// Returns the path it wrote.
    fn submit(&self, id: &str, cwd: &Path) -> PathBuf {
        let state = self.dir.path().join(format!("state-{id}"));
        let lab = state.join("0-demo");
        std::fs::create_dir_all(&lab).unwrap();
        let reference = ok(kdiag()
            .args(["lab", "solution", "0-demo", "--course", s(&self.course)])
            .args(["--learner", id])
            .output()
            .unwrap());
        let function = reference
            .lines()
            .find_map(|l| l.strip_prefix("function = "))
            .unwrap()
            .trim_matches('"');
        std::fs::write(
            lab.join("profile.folded"),
            format!("io-app;main;{function};write 3\n"),
        )
        .unwrap();
        let answers: Vec<String> = reference
            .lines()
            .map(|l| match l.starts_with("profile = ") {
                true => "profile = \"profile.folded\"".to_string(),
                false => l.to_string(),
            })
            .collect();
        std::fs::write(lab.join("answers.toml"), answers.join("\n")).unwrap();
        std::fs::write(
            lab.join("progress.toml"),
            format!("seed = \"{}\"\n", self.seed(id)),
        )
        .unwrap();
        std::fs::create_dir_all(cwd).unwrap();
        let out = ok(kdiag()
            .args([
                "lab",
                "submit",
                "0-demo",
                "--dir",
                s(&state),
                "--learner",
                id,
            ])
            .current_dir(cwd)
            .output()
            .unwrap());
        let file = cwd.join(format!("kdiag-0-demo-{id}.tar"));
        assert!(file.is_file(), "{out}");
        file
    }
}

/// The shell script of the recipe `name` in docs/instructor.md, its
/// platform's root (`/autograder`, `/grade`) moved to `root`.
fn recipe(name: &str, platform_root: &str, root: &Path) -> String {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/instructor.md"))
        .unwrap();
    let marker = format!("# recipe: {name}\n");
    let start = doc
        .find(&marker)
        .unwrap_or_else(|| panic!("no recipe {name}"));
    let end = start + doc[start..].find("```").unwrap();
    doc[start..end].replace(platform_root, s(root))
}

/// Run a recipe with kdiag on the PATH (as Gradescope's setup.sh puts it).
fn run_recipe(script: &str) -> Output {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_kdiag"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::process::Command::new("sh")
        .args(["-ec", script])
        .env("PATH", path)
        .output()
        .unwrap()
}

fn results(file: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap()
}

#[test]
fn gradescope_recipe_grades_the_honest_and_refuses_the_borrowed() {
    let class = Class::new();
    let max = 15.0; // 0-demo's graded checks
    for (who, email, bundle_of) in [
        ("ada", "ada@example.org", "1234"),
        ("bob", "bob@example.org", "1234"),
    ] {
        let root = class.dir.path().join(format!("autograder-{who}"));
        let submission = root.join("submission");
        if who == "ada" {
            class.submit(bundle_of, &submission);
        } else {
            // Bob uploads Ada's bundle and a metadata file naming Ada.
            let ada = class
                .dir
                .path()
                .join("autograder-ada/submission/kdiag-0-demo-1234.tar");
            std::fs::create_dir_all(&submission).unwrap();
            std::fs::copy(ada, submission.join("kdiag-0-demo-1234.tar")).unwrap();
            std::fs::write(
                submission.join("submission_metadata.json"),
                r#"{"users": [{"email": "ada@example.org", "sid": "1234"}]}"#,
            )
            .unwrap();
        }
        std::fs::write(
            root.join("submission_metadata.json"),
            format!(
                r#"{{"id": 7, "users": [{{"email": "{email}", "name": "{who}", "sid": ""}}]}}"#
            ),
        )
        .unwrap();
        let source = root.join("source");
        std::fs::create_dir_all(&source).unwrap();
        std::fs::copy(&class.course, source.join("course.toml")).unwrap();
        std::fs::copy(&class.roster, source.join("roster.csv")).unwrap();
        std::fs::create_dir_all(root.join("results")).unwrap();
        let out = run_recipe(&recipe("gradescope run_autograder", "/autograder", &root));
        let r = results(&root.join("results/results.json"));
        let output = r["output"].as_str().unwrap();
        if who == "ada" {
            assert_eq!(out.status.code(), Some(0), "{r:#}{}", stderr(&out));
            assert_eq!(r["score"].as_f64(), Some(max), "{r:#}");
            let seed = class.seed("1234");
            assert!(
                output.contains(&format!("learner 1234, seed {seed}")),
                "{output}"
            );
            assert_eq!(r["extra_data"]["seed"], seed.as_str());
        } else {
            assert_eq!(out.status.code(), Some(2), "{r:#}");
            assert_eq!(r["score"].as_f64(), Some(0.0), "{r:#}");
            assert!(
                output.contains("manifest names learner \"1234\"")
                    && output.contains("handed in by bob@example.org"),
                "{output}"
            );
        }
    }
}

#[test]
fn prairielearn_recipe_grades_the_manifest_s_learner_of_the_roster() {
    let class = Class::new();
    let root = class.dir.path().join("grade");
    let files = root.join("serverFilesCourse/kdiag");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::copy(&class.course, files.join("course.toml")).unwrap();
    std::fs::copy(&class.roster, files.join("roster.csv")).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kdiag"), files.join("kdiag")).unwrap();
    let script = recipe("prairielearn run.sh", "/grade", &root);
    let student = root.join("student");
    class.submit("5678", &student);
    // A metadata file inside the upload is never read.
    std::fs::write(
        student.join("submission_metadata.json"),
        r#"{"users": [{"email": "ada@example.org"}]}"#,
    )
    .unwrap();
    let out = run_recipe(&script);
    let r = results(&root.join("results/results.json"));
    assert_eq!(out.status.code(), Some(0), "{r:#}{}", stderr(&out));
    assert_eq!(
        (r["gradable"].as_bool(), r["score"].as_f64()),
        (Some(true), Some(1.0)),
        "{r:#}"
    );
    let seed = class.seed("5678");
    let message = r["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("learner 5678, seed {seed}")),
        "{message}"
    );
    // A bundle of a learner the roster does not know: not gradable.
    std::fs::write(files.join("roster.csv"), "id,email\n1234,ada@example.org\n").unwrap();
    let out = run_recipe(&script);
    let r = results(&root.join("results/results.json"));
    assert_eq!(out.status.code(), Some(2), "{r:#}");
    assert_eq!(r["gradable"], false, "{r:#}");
    assert!(
        r["message"].as_str().unwrap().contains("not in the roster"),
        "{r:#}"
    );
}

#[test]
fn a_class_folder_reports_duplicates_other_labs_archives_and_the_missing() {
    let class = Class::new();
    let subs = class.dir.path().join("subs");
    let first = class.submit("1234", &class.dir.path().join("first"));
    std::fs::create_dir_all(&subs).unwrap();
    std::fs::copy(&first, subs.join("1234.tar")).unwrap();
    // A later bundle of the same learner, under lab submit's name.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    class.submit("1234", &subs);
    // A zip, and a bundle for another lab.
    std::fs::write(subs.join("5678.zip"), b"PK\x03\x04 a zip").unwrap();
    let other = subs.join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("answers.toml"), "[who]\ncomm = 'x'\n").unwrap();
    std::fs::write(
        other.join("manifest.toml"),
        "format_version = 2\nlab = \"1-io\"\nkdiag_version = \"0\"\nlearner = \"5678\"\n\
         seed = \"x\"\nfiles = []\n",
    )
    .unwrap();
    let out = kdiag()
        .args(["grade", "0-demo", s(&subs), "--course", s(&class.course)])
        .args(["--roster", s(&class.roster), "--format", "json"])
        .output()
        .unwrap();
    let g: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = |name: &str| {
        g["submissions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["submission"] == name)
            .unwrap_or_else(|| panic!("no {name}: {g:#}"))
            .clone()
    };
    assert_eq!(
        row("kdiag-0-demo-1234")["score"].as_f64(),
        Some(15.0),
        "{g:#}"
    );
    let older = row("1234")["error"].as_str().unwrap().to_string();
    assert!(
        older.starts_with("superseded: learner 1234 also handed in kdiag-0-demo-1234"),
        "{older}"
    );
    assert_eq!(g["duplicates"].as_array().unwrap().len(), 1, "{g:#}");
    let zip = row("5678")["error"].as_str().unwrap().to_string();
    assert!(zip.contains("a zip archive"), "{zip}");
    let lab = row("other")["error"].as_str().unwrap().to_string();
    assert!(lab.contains("for lab 1-io"), "{lab}");
    let tally = stderr(&out);
    assert!(
        tally.contains("4 submissions for lab 0-demo: 1 graded, 2 could not be graded, 1 superseded by a newer one, 0 missing"),
        "{tally}"
    );
}

#[test]
fn messages_say_what_happened() {
    let class = Class::new();
    // course init over an existing file is a usage error.
    let out = kdiag()
        .args(["course", "init", "--out", s(&class.course)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("already exists"), "{}", stderr(&out));
    // Gradescope metadata that is not JSON: its parse error.
    let root = class.dir.path().join("autograder");
    let submission = root.join("submission");
    class.submit("1234", &submission);
    std::fs::write(root.join("submission_metadata.json"), "{\"users\": [").unwrap();
    let grade = |format: &str| {
        kdiag()
            .args([
                "grade",
                "0-demo",
                s(&submission),
                "--course",
                s(&class.course),
            ])
            .args(["--roster", s(&class.roster), "--format", format])
            .output()
            .unwrap()
    };
    let out = grade("text");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stdout(&out).contains("not JSON: EOF while parsing a list"),
        "{}",
        stdout(&out)
    );
    // Answers no check reads: a warning, in the output.
    std::fs::write(
        root.join("submission_metadata.json"),
        r#"{"users": [{"email": "ada@example.org"}]}"#,
    )
    .unwrap();
    let folder = class.dir.path().join("folder");
    std::fs::create_dir(&folder).unwrap();
    let tar = submission.join("kdiag-0-demo-1234.tar");
    assert!(
        std::process::Command::new("tar")
            .args(["-xf", s(&tar), "-C", s(&folder)])
            .status()
            .unwrap()
            .success()
    );
    std::fs::remove_file(&tar).unwrap();
    let answers = std::fs::read_to_string(folder.join("answers.toml")).unwrap();
    std::fs::write(
        submission.join("answers.toml"),
        answers + "\n[whot]\ncomm = 'io-app'\n",
    )
    .unwrap();
    for f in ["manifest.toml", "artifacts"] {
        std::fs::rename(folder.join(f), submission.join(f)).unwrap();
    }
    let out = grade("json");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["score"].as_f64(), Some(15.0), "{j:#}");
    assert!(
        j["warnings"][0]
            .as_str()
            .unwrap()
            .contains("ignored): whot.comm"),
        "{j:#}"
    );
}
