//! A course server with an LMS roster (`student_id,name,email,login`): root
//! installs the course with the roster, 20 learners answer lab 0-demo and
//! submit, and `grade --roster --require-attested` gives each the score
//! their answers earn, with no copy flag on anyone. Then the learner
//! policy through the real sudoers rule: what observes other users is
//! refused, with the reason, and a classmate's lab folder is not packed.
//!
//! kdiag-learner goes through the real sudo rule. The 19 others are system
//! accounts (daemon, bin, ...: real users with real names, none in an admin
//! group) for which root runs kdiag with the environment sudo sets
//! (SUDO_UID, SUDO_GID, SUDO_USER): creating 19 login accounts is beyond
//! a test, and kdiag takes nothing else from sudo.
//!
//! The same class again through `kdiag serve`, set up and graded by the
//! commands of docs/instructor.md's course-server recipe, the learners
//! with no sudo at all: each runs kdiag as their own uid.
//!
//! The installed course is machine-wide while it lasts: the tests take
//! turns.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use common::service::Service;
use common::*;

/// The installed course is machine-wide: one test at a time holds it.
static MACHINE: Mutex<()> = Mutex::new(());

/// Removes the installed course, its learner map and the journals on drop.
struct Installed(Vec<u32>);

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file("/var/lib/kdiag/course.toml");
        let _ = std::fs::remove_file("/var/lib/kdiag/learners.toml");
        for uid in &self.0 {
            let _ = std::fs::remove_dir_all(format!("/var/lib/kdiag/journal/{uid}"));
        }
    }
}

fn run(cmd: &mut Command) -> (i32, String) {
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!("{}{}", stdout(&out), stderr(&out)),
    )
}

/// System accounts that stand in for learners (uid, gid, name).
fn accounts() -> Vec<(u32, u32, String)> {
    let names = [
        "daemon",
        "bin",
        "sys",
        "sync",
        "games",
        "man",
        "lp",
        "mail",
        "news",
        "uucp",
        "proxy",
        "www-data",
        "backup",
        "list",
        "irc",
        "nobody",
        "_apt",
        "messagebus",
        "uuidd",
    ];
    names
        .iter()
        .filter_map(|n| {
            let id = |flag: &str| -> Option<u32> {
                let o = Command::new("id").args([flag, n]).output().ok()?;
                String::from_utf8_lossy(&o.stdout).trim().parse().ok()
            };
            let groups = Command::new("id").args(["-Gn", n]).output().ok()?;
            let admin = String::from_utf8_lossy(&groups.stdout)
                .split_whitespace()
                .any(|g| ["sudo", "admin", "wheel"].contains(&g));
            (!admin).then_some((id("-u")?, id("-g")?, n.to_string()))
        })
        .take(19)
        .collect()
}

/// The 20 learners: kdiag-learner, then 19 of `accounts`; None where the
/// learner is missing (skipped, or failed under CI=true).
fn class_of_twenty(test: &str) -> Option<Vec<(u32, u32, String)>> {
    let (uid, gid) = learner(test)?;
    let mut people = vec![(uid, gid, LEARNER.to_string())];
    people.extend(accounts());
    assert_eq!(people.len(), 20, "{people:?}");
    Some(people)
}

/// kdiag for learner `n` of `accounts` (0: kdiag-learner through sudo).
fn as_learner(who: &(u32, u32, String), real_sudo: bool) -> Command {
    if real_sudo {
        return kdiag_as_learner();
    }
    let mut c = kdiag();
    c.env("SUDO_UID", who.0.to_string())
        .env("SUDO_GID", who.1.to_string())
        .env("SUDO_USER", &who.2);
    c
}

/// An LMS export of `people`: student ids 2000, 2001, ...; their accounts
/// in the login column.
fn roster(people: &[(u32, u32, String)]) -> String {
    let mut roster = String::from("student_id,name,email,login\n");
    for (i, p) in people.iter().enumerate() {
        roster.push_str(&format!(
            "{},Learner {i},l{i}@example.org,{}\n",
            2000 + i,
            p.2
        ));
    }
    roster
}

/// Each of `people` answers 0-demo (some wrongly, some wrong then right),
/// re-checks, and submits a bundle, copied into `dir`/submissions; kdiag
/// runs for person `i` as `kdiag_for_person(i)`. Their folders are `dir`/labs-I. Returns
/// the points each learner's answers earn, by student id.
fn answer_and_submit(
    people: &[(u32, u32, String)],
    dir: &Path,
    kdiag_for_person: impl Fn(usize) -> Command,
) -> BTreeMap<String, i64> {
    let path = |n: &str| dir.join(n);
    let checks: toml::Table = toml::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("checks/0-demo.toml"))
            .unwrap(),
    )
    .unwrap();
    let points: BTreeMap<String, i64> = checks["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| {
            Some((
                c["id"].as_str()?.to_string(),
                c.get("points")?.as_integer()?,
            ))
        })
        .collect();
    std::fs::create_dir(path("submissions")).unwrap();
    let mut expected = BTreeMap::new();
    for (i, p) in people.iter().enumerate() {
        let sid = (2000 + i).to_string();
        let (code, out) = run(kdiag()
            .args(["lab", "solution", "0-demo", "--course"])
            .arg(path("course.toml"))
            .args(["--learner", &sid]));
        assert_eq!(code, 0, "{out}");
        let solution: toml::Table = toml::from_str(&out).unwrap();
        let labs: PathBuf = path(&format!("labs-{i}"));
        std::fs::create_dir(&labs).unwrap();
        std::os::unix::fs::chown(&labs, Some(p.0), Some(p.1)).unwrap();
        let kdiag_for = |args: &[&str]| {
            run(kdiag_for_person(i)
                .args(args)
                .arg("--dir")
                .arg(&labs)
                .current_dir(&labs))
        };
        let mut earned = 0;
        for (step, answers) in &solution {
            for (key, value) in answers.as_table().unwrap() {
                let id = format!("{step}.{key}");
                let Some(&pts) = points.get(&id).filter(|_| step != "artifacts") else {
                    continue;
                };
                let value = match value {
                    toml::Value::String(s) => s.clone(),
                    v => v.to_string(),
                };
                // Every fourth learner gets the file wrong; every fifth
                // first answers it wrong, checks, then answers right.
                let wrong = id == "why.file" && (i % 4 == 1 || i % 5 == 2);
                let given = if wrong { "nothing.bin" } else { &value };
                let (code, out) = kdiag_for(&["answer", "0-demo", &id, given]);
                assert_eq!(code, 0, "{} {id}: {out}", p.2);
                if wrong && i % 4 != 1 {
                    let (code, out) = kdiag_for(&["check", "0-demo", "--only", &id]);
                    assert_eq!(code, 1, "{out}");
                    assert!(out.contains("(attempt 1)"), "{out}");
                    let (code, out) = kdiag_for(&["answer", "0-demo", &id, &value]);
                    assert_eq!(code, 0, "{out}");
                }
                if !(wrong && i % 4 == 1) {
                    earned += pts;
                }
            }
        }
        // Re-checking unchanged answers counts nothing.
        for _ in 0..3 {
            kdiag_for(&["check", "0-demo"]);
        }
        if i == 0 {
            // An old progress file's seed is warned about, never used.
            let progress = labs.join("0-demo/progress.toml");
            std::fs::write(&progress, "seed = \"abcd-efgh-jkmn\"\n").unwrap();
            std::os::unix::fs::chown(&progress, Some(p.0), Some(p.1)).unwrap();
            let (_, out) = kdiag_for(&["check", "0-demo"]);
            assert!(
                out.contains("progress.toml names seed abcd-efgh-jkmn"),
                "{out}"
            );
        }
        let (code, out) = kdiag_for(&["lab", "submit", "0-demo", "--folder", "--out", "bundle"]);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains(&format!("for learner {sid}")), "{out}");
        let folder = labs.join("bundle");
        let m = std::fs::metadata(&folder).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o777), (p.0, 0o700));
        let a = std::fs::metadata(folder.join("answers.toml")).unwrap();
        assert_eq!(a.mode() & 0o777, 0o600);
        let lab_dir = std::fs::metadata(labs.join("0-demo")).unwrap();
        assert_eq!(
            lab_dir.mode() & 0o777,
            0o700,
            "a learner's lab folder is theirs alone"
        );
        let to = path(&format!("submissions/kdiag-0-demo-{sid}"));
        assert!(
            Command::new("cp")
                .arg("-r")
                .arg(&folder)
                .arg(&to)
                .status()
                .unwrap()
                .success()
        );
        expected.insert(sid, earned);
    }

    expected
}

/// `grade --require-attested --format json`'s `doc` of the 20: every
/// learner the score their answers earn, attested, none flagged.
fn graded_as_earned(doc: &serde_json::Value, expected: &BTreeMap<String, i64>) {
    let rows = doc["submissions"].as_array().unwrap();
    assert_eq!(rows.len(), 20, "{doc:#}");
    for r in rows {
        let learner = r["learner"].as_str().unwrap();
        assert!(r["error"].is_null(), "{r:#}");
        assert_eq!(
            r["score"].as_f64().unwrap() as i64,
            expected[learner],
            "learner {learner}: {r:#}"
        );
        let a: Vec<&str> = r["attestation"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        assert!(a[0].starts_with("attested: "), "{a:?}");
        assert!(
            r["flags"].as_array().unwrap().is_empty(),
            "an honest learner flagged: {r:#}"
        );
        let i: usize = learner.parse::<usize>().unwrap() - 2000;
        if i % 5 == 2 && i % 4 != 1 {
            assert!(a.iter().any(|l| l.contains("why.file 2")), "{a:?}");
        }
    }
    assert!(doc["suspicious"].as_array().unwrap().is_empty(), "{doc:#}");
}

#[test]
fn an_lms_roster_s_learners_get_what_their_answers_earn_and_observe_only_their_own() {
    let Some(people) = class_of_twenty("an_lms_roster_s_learners_get_what_their_answers_earn")
    else {
        return;
    };
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let _installed = Installed(people.iter().map(|p| p.0).collect());
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let path = |n: &str| d.path().join(n);
    let (code, out) = run(kdiag()
        .args(["course", "init", "--labs", "0-demo", "--out"])
        .arg(path("course.toml")));
    assert_eq!(code, 0, "{out}");
    std::fs::write(path("roster.csv"), roster(&people)).unwrap();
    let (code, out) = run(kdiag()
        .args(["course", "install", "--course"])
        .arg(path("course.toml"))
        .arg("--roster")
        .arg(path("roster.csv")));
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        std::fs::metadata("/var/lib/kdiag").unwrap().mode() & 0o777,
        0o711
    );

    let expected = answer_and_submit(&people, d.path(), |i| as_learner(&people[i], i == 0));
    let grade = |extra: &[&str]| {
        let out = kdiag()
            .args(["grade", "0-demo"])
            .arg(path("submissions"))
            .arg("--course")
            .arg(path("course.toml"))
            .args(["--format", "json", "--require-attested"])
            .args(extra)
            .output()
            .unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
        doc
    };
    let roster_arg = path("roster.csv");
    graded_as_earned(
        &grade(&["--roster", roster_arg.to_str().unwrap()]),
        &expected,
    );
    // Without the roster the learner ids still match their seeds here
    // (the server signed for the roster's id).
    let doc = grade(&[]);
    assert_eq!(doc["submissions"].as_array().unwrap().len(), 20);

    // The learner policy, through the real sudo rule.
    let me = &people[0];
    let refused = |args: &[&str], why: &str| {
        let (code, out) = run(kdiag_as_learner().args(args));
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(out.contains(why), "{args:?}: {out}");
    };
    let init = "1";
    refused(
        &["watch", "--listen", "127.0.0.1:0"],
        "may not run kdiag watch",
    );
    refused(
        &["execsnoop", "-u", "root", "-d", "0.1"],
        "-u names another user",
    );
    refused(
        &["iosnoop", "--tier", "perf", "-d", "0.1"],
        "the perf tier traces every user's",
    );
    refused(
        &["profile", "-p", init, "-d", "0.1"],
        "PID 1 is root's, not yours",
    );
    refused(&["diagnose", "-p", init, "-d", "0.1"], "PID 1 is root's");
    refused(&["ps", "-p", init], "PID 1 is root's");
    refused(
        &["lab", "0-demo", "--seed", "abcd-efgh-jkmn"],
        "your variant is your account's",
    );
    refused(
        &["lab", "0-demo", "--labs", "/tmp"],
        "--labs is for instructors",
    );
    // What is theirs stays open: their own process, their own commands.
    let own = Command::new("sudo")
        .args(["-n", "-u", LEARNER, "sleep", "30"])
        .spawn()
        .unwrap();
    let sleeper = (0..50)
        .find_map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let o = Command::new("pgrep")
                .args(["-u", LEARNER, "-x", "sleep"])
                .output()
                .ok()?;
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()?
                .trim()
                .parse::<u32>()
                .ok()
        })
        .expect("the learner's sleep");
    let (code, out) = run(kdiag_as_learner().args(["ps", "-p", &sleeper.to_string()]));
    let mut own = own;
    let _ = own.kill();
    let _ = Command::new("kill").arg(sleeper.to_string()).status();
    let _ = own.wait();
    assert_eq!(code, 0, "{out}");
    // System-wide instruments narrowed to theirs at the source (what they
    // show is tests/service.rs's).
    for args in [
        &["execsnoop", "-u", LEARNER, "-d", "0.2"][..],
        &["execsnoop", "-d", "0.2"],
        &["profile", "-a", "-d", "0.2"],
    ] {
        let (code, out) = run(kdiag_as_learner().args(args));
        // Run, not refused: a profile of sleeping processes has no samples.
        assert!(code == 0 || out.contains("no samples"), "{args:?}: {out}");
    }

    // A classmate's lab folder is never packed as theirs.
    let classmate = path("labs-1");
    let (code, out) = run(kdiag_as_learner()
        .args(["lab", "submit", "0-demo", "--out"])
        .arg(path("labs-0/stolen.tar"))
        .arg("--dir")
        .arg(&classmate));
    assert_eq!(code, 2, "{out}");
    assert!(!path("labs-0/stolen.tar").exists());
    assert!(
        out.contains("not yours") || out.contains("permission denied"),
        "{out}"
    );
    let _ = me;
}

/// The shell lines of the recipe `name` in docs/instructor.md, each as its
/// words (comments and `sudo ` dropped: the test is root).
fn recipe(name: &str) -> Vec<Vec<String>> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/instructor.md"))
        .unwrap();
    let marker = format!("# recipe: {name}\n");
    let start = doc
        .find(&marker)
        .unwrap_or_else(|| panic!("no recipe {name}"))
        + marker.len();
    let end = start + doc[start..].find("```").unwrap();
    doc[start..end]
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let l = l.strip_prefix("sudo ").unwrap_or(l);
            assert!(
                l.starts_with("kdiag "),
                "a recipe line that is not kdiag: {l}"
            );
            l.split_whitespace().skip(1).map(String::from).collect()
        })
        .collect()
}

#[test]
fn the_docs_course_server_serves_twenty_learners_without_sudo() {
    let Some(people) = class_of_twenty("the_docs_course_server_serves_twenty_learners") else {
        return;
    };
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let _installed = Installed(people.iter().map(|p| p.0).collect());
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(d.path().join("roster.csv"), roster(&people)).unwrap();
    // The doc's socket is /run/kdiag/kdiag.sock; the test's is its own.
    let mut service = None;
    for words in recipe("course-server") {
        if words[0] == "serve" {
            service = Some(Service::start(&words));
            continue;
        }
        let (code, out) = run(kdiag().args(&words).current_dir(d.path()));
        assert_eq!(code, 0, "kdiag {words:?}: {out}");
    }
    let service = service.expect("the recipe starts the service");
    let expected = answer_and_submit(&people, d.path(), |i| {
        service.kdiag_as(people[i].0, people[i].1)
    });
    let grading = recipe("course-server-grade");
    assert_eq!(grading.len(), 1, "{grading:?}");
    let out = kdiag()
        .args(&grading[0])
        .args(["--format", "json"])
        .current_dir(d.path())
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    graded_as_earned(&doc, &expected);
}
