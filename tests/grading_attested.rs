//! Attestation on a course server, through the real sudoers rule: root
//! installs a course with at most 2 checks per question; the learner
//! (kdiag-learner, `sudo -u kdiag-learner sudo kdiag ...`) answers, checks
//! (counted, journaled, refused past the limit) and submits a bundle kdiag
//! signs. `grade --course` says it is attested, with the attempts; the
//! same bundle edited after signing, and one made outside the server, are
//! not attested, and `--require-attested` refuses them. The same cap and
//! signature hold through `kdiag serve`, for a learner with no sudo rule.
//!
//! The course is installed in /var/lib/kdiag for the test's duration only
//! (removed however the test ends): while it is there, every kdiag run
//! through sudo is on a "course server".

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use common::service::Service;
use common::*;

/// The installed course is machine-wide: one test at a time holds it.
static MACHINE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Removes the installed course and the learner's journals on drop.
struct Installed(u32);

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file("/var/lib/kdiag/course.toml");
        let _ = std::fs::remove_dir_all(format!("/var/lib/kdiag/journal/{}", self.0));
    }
}

fn run(cmd: &mut Command) -> (i32, String) {
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!("{}{}", stdout(&out), stderr(&out)),
    )
}

fn grade(sub: &Path, course: &Path, extra: &[&str]) -> (i32, serde_json::Value) {
    let out = kdiag()
        .args(["grade", "0-demo"])
        .arg(sub)
        .arg("--course")
        .arg(course)
        .args(["--format", "json"])
        .args(extra)
        .output()
        .unwrap();
    let doc = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    (out.status.code().unwrap(), doc)
}

fn attestation(doc: &serde_json::Value) -> String {
    doc["attestation"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_string() + "\n")
        .collect()
}

/// A course with at most 2 new answers per question, installed (until
/// the returned guard drops): its file, in `d`.
fn install(d: &Path, uid: u32) -> (std::path::PathBuf, Installed) {
    std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let course = d.join("course.toml");
    let (code, out) = run(kdiag()
        .args(["course", "init", "--out"])
        .arg(&course)
        .args(["--labs", "0-demo"]));
    assert_eq!(code, 0, "{out}");
    let mut text = std::fs::read_to_string(&course).unwrap();
    text.push_str("max_attempts = 2\n");
    std::fs::write(&course, text).unwrap();
    let installed = Installed(uid);
    let _ = std::fs::remove_dir_all(format!("/var/lib/kdiag/journal/{uid}"));
    let (code, out) = run(kdiag().args(["course", "install", "--course"]).arg(&course));
    assert_eq!(code, 0, "{out}");
    let key = std::fs::metadata("/var/lib/kdiag/course.toml").unwrap();
    assert_eq!((key.uid(), key.mode() & 0o777), (0, 0o600));
    (course, installed)
}

/// The learner `learner` (uid) answers and checks through `as_learner`
/// (kdiag ARGS --dir LABS in LABS): attempts counted once per new answer,
/// capped at 2 on every path, journaled; then the bundle kdiag signs,
/// graded attested with its attempts. Returns the bundle.
fn capped_and_signed(
    as_learner: &dyn Fn(&[&str]) -> (i32, String),
    labs: &Path,
    (uid, gid): (u32, u32),
    learner: &str,
    course: &Path,
) -> std::path::PathBuf {
    let (code, out) = as_learner(&["answer", "0-demo", "who.comm", "io-app"]);
    assert_eq!(code, 0, "{out}");
    // An option cannot choose another identity or seed.
    let (code, out) = as_learner(&["check", "0-demo", "--seed", "abcd-efgh-jkmn"]);
    assert_eq!(code, 2, "{out}");
    // An attempt is a new answer: checking it again counts nothing.
    for _ in 0..3 {
        let (code, out) = as_learner(&["check", "0-demo", "--only", "who.comm"]);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("attempt 1 of 2"), "{out}");
    }
    let (code, out) = as_learner(&["answer", "0-demo", "who.comm", "bash"]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = as_learner(&["check", "0-demo"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("attempt 2 of 2"), "{out}");
    // Past the course's limit a new answer is not judged, on every path:
    // the lab folder, an answers file, --labs.
    as_learner(&["answer", "0-demo", "who.comm", "io-app"]);
    let (code, out) = as_learner(&["check", "0-demo", "--only", "who.comm"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no attempts left"), "{out}");
    let answers_file = labs.join("guess.toml");
    std::fs::write(&answers_file, "[who]\ncomm = \"io-ap\"\n").unwrap();
    std::os::unix::fs::chown(&answers_file, Some(uid), Some(gid)).unwrap();
    let (code, out) = as_learner(&[
        "check",
        "0-demo",
        "--answers",
        answers_file.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no attempts left"), "{out}");
    let (code, out) = as_learner(&["check", "0-demo", "--labs", labs.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--labs is for instructors"), "{out}");
    // Other questions, unanswered, cost nothing.
    let (_, out) = as_learner(&["check", "0-demo"]);
    assert!(out.contains("no attempts left"), "{out}");
    let journal = format!("/var/lib/kdiag/journal/{uid}/0-demo.journal");
    let j = std::fs::metadata(&journal).unwrap();
    assert_eq!((j.uid(), j.mode() & 0o077), (0, 0));
    let lines = std::fs::read_to_string(&journal).unwrap();
    assert_eq!(lines.matches("\tcheck\twho.comm\t").count(), 2, "{lines}");
    assert_eq!(lines.matches("\tcheck\t").count(), 2, "{lines}");
    assert_eq!(lines.matches("\tanswer\twho.comm\t").count(), 3, "{lines}");

    let signed = labs.join("signed.tar");
    let (code, out) = as_learner(&["lab", "submit", "0-demo", "--out", signed.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(std::fs::metadata(&signed).unwrap().uid(), uid);
    let (code, doc) = grade(&signed, course, &["--require-attested"]);
    let a = attestation(&doc);
    assert!(code == 0 || code == 1, "{doc}");
    assert_eq!(doc["learner"], learner, "{doc}");
    assert!(a.starts_with("attested: "), "{a}");
    assert!(a.contains("attempts per question: who.comm 2"), "{a}");
    let who_comm = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "who.comm")
        .unwrap();
    assert_eq!(who_comm["attempts"], 2, "{doc}");

    signed
}

#[test]
fn a_signed_bundle_is_attested_and_an_edited_one_is_not() {
    let Some((uid, gid)) = learner("a_signed_bundle_is_attested_and_an_edited_one_is_not") else {
        return;
    };
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let (course, _installed) = install(d.path(), uid);
    // The learner cannot install one (usage: not through their sudo rule).
    let (code, out) = run(kdiag_as_learner()
        .args(["course", "install", "--course"])
        .arg(&course));
    assert_eq!(code, 2, "{out}");

    // The learner's lab folder.
    let labs = d.path().join("labs");
    std::fs::create_dir(&labs).unwrap();
    std::os::unix::fs::chown(&labs, Some(uid), Some(gid)).unwrap();
    let as_learner = |args: &[&str]| {
        run(kdiag_as_learner()
            .args(args)
            .arg("--dir")
            .arg(&labs)
            .current_dir(&labs))
    };
    let signed = capped_and_signed(&as_learner, &labs, (uid, gid), LEARNER, &course);
    // Around the sudo rule, as the learner themselves: no other variant,
    // and no check without the course server.
    let (code, out) = learner_without_sudo(&labs, &["--seed", "abcd-efgh-jkmn"]);
    assert_eq!(code, 2, "without sudo: {out}");
    assert!(out.contains("your variant is your account's"), "{out}");
    let (code, out) = learner_without_sudo(&labs, &[]);
    assert_eq!(code, 3, "without sudo: {out}");
    assert!(out.contains("run sudo kdiag"), "{out}");

    // Edited after signing: the answer changed inside the tar.
    let x = d.path().join("x");
    std::fs::create_dir(&x).unwrap();
    let tar = |args: &[&str]| {
        let st = Command::new("tar").args(args).status().unwrap();
        assert!(st.success(), "tar {args:?}");
    };
    tar(&["-xf", signed.to_str().unwrap(), "-C", x.to_str().unwrap()]);
    let answers = x.join("answers.toml");
    let edited_text = std::fs::read_to_string(&answers)
        .unwrap()
        .replace("io-app", "io-app2");
    std::fs::write(&answers, edited_text).unwrap();
    let edited = d.path().join("edited.tar");
    tar(&[
        "-cf",
        edited.to_str().unwrap(),
        "-C",
        x.to_str().unwrap(),
        ".",
    ]);
    let (_, doc) = grade(&edited, &course, &[]);
    let a = attestation(&doc);
    assert!(
        a.contains("not attested: the signature does not match"),
        "{a}"
    );
    let (code, doc) = grade(&edited, &course, &["--require-attested"]);
    assert_eq!(code, 2, "{doc}");
    assert_eq!(doc["gradable"], false, "{doc}");

    // Made outside the server (root's own lab folder, no sudo): unattested.
    let own = d.path().join("own");
    let (code, out) = run(kdiag()
        .args(["answer", "0-demo", "who.comm", "io-app", "--dir"])
        .arg(&own));
    assert_eq!(code, 0, "{out}");
    let plain = d.path().join("plain.tar");
    let (code, out) = run(kdiag()
        .args([
            "lab",
            "submit",
            "0-demo",
            "--learner",
            "kdiag-learner",
            "--out",
        ])
        .arg(&plain)
        .arg("--dir")
        .arg(&own));
    assert_eq!(code, 0, "{out}");
    let (_, doc) = grade(&plain, &course, &[]);
    assert!(
        attestation(&doc).starts_with("not attested: no attestation"),
        "{doc}"
    );
    let (code, _) = grade(&plain, &course, &["--require-attested"]);
    assert_eq!(code, 2);
}

/// `kdiag check 0-demo ARGS --dir LABS` run by the learner themselves, not
/// through the sudo rule (root switches to them).
fn learner_without_sudo(labs: &std::path::Path, args: &[&str]) -> (i32, String) {
    run(Command::new("sudo")
        .args([
            "-n",
            "-u",
            LEARNER,
            env!("CARGO_BIN_EXE_kdiag"),
            "check",
            "0-demo",
        ])
        .args(args)
        .arg("--dir")
        .arg(labs)
        .current_dir(labs))
}

/// The same cap and signature through `kdiag serve`, the learner with no
/// sudo at all.
#[test]
fn through_the_service_attempts_are_capped_and_the_bundle_attested() {
    let Some((uid, gid)) = learner("through_the_service_attempts_are_capped") else {
        return;
    };
    let _machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let (course, _installed) = install(d.path(), uid);
    let service = Service::start(&["serve".to_string()]);
    let labs = d.path().join("labs");
    std::fs::create_dir(&labs).unwrap();
    std::os::unix::fs::chown(&labs, Some(uid), Some(gid)).unwrap();
    let as_learner = |args: &[&str]| {
        run(service
            .kdiag_as(uid, gid)
            .args(args)
            .arg("--dir")
            .arg(&labs)
            .current_dir(&labs))
    };
    capped_and_signed(&as_learner, &labs, (uid, gid), LEARNER, &course);
}
