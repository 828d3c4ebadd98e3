//! `kdiag lab`, `answer`, `check` and `lab submit`: a real lab run with its
//! workload (in `--plain` mode, one command a line), resuming it, and
//! submitting it (tests/grading.rs has courses and grading;
//! tests/lab_app.rs the interactive app in a terminal; tests/course/demo.rs
//! the whole lab in plain mode).

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::lab_run::{LabRun, pid_alive};
use common::{kdiag, require_root, scratch_of, stdout};

/// 0-demo's lab run.
fn start(root: &Path, seed: &str) -> LabRun {
    LabRun::start("0-demo", root, seed)
}

/// The workload's PID and its scratch directory (where its open data file
/// is).
fn workload(lab: &LabRun) -> (u64, PathBuf) {
    let pid = lab.pid();
    (pid, scratch_of(pid))
}

#[test]
fn lab_checks_a_step_and_leaves_nothing_behind() {
    if !require_root("lab_checks_a_step_and_leaves_nothing_behind") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let mut lab = start(root.path(), "step-11");
    let (pid, scratch) = workload(&lab);
    assert!(pid_alive(pid), "the workload runs");
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm.trim(), "io-app");

    // A wrong answer fails without giving the right one away.
    lab.answer("who.pid", "1");
    lab.answer("who.comm", "io-app");
    lab.send("check");
    let seen = lab.expect("score ");
    assert!(seen.contains("not yet: who.pid: "), "{seen}");
    assert!(seen.contains("right: who.comm"), "{seen}");
    assert!(!seen.contains(&pid.to_string()), "{seen}");
    lab.send("hint");
    lab.expect("Hint: ");

    lab.answer("who.pid", &pid.to_string());
    lab.send("check");
    let seen = lab.expect("score ");
    assert!(seen.contains("Step 1 done."), "{seen}");
    assert!(
        seen.contains("your progress, not your grade"),
        "who.pid is a live check: {seen}"
    );
    lab.send("next");
    // The lab prints the exact commands, with the --dir it was given.
    let seen = lab.expect("what.sync <yes|no>");
    assert!(seen.contains("-- Step 2/4"), "{seen}");
    assert!(
        seen.contains(&format!(
            "kdiag answer 0-demo what.sync <yes|no> --dir {}",
            root.path().display()
        )),
        "{seen}"
    );
    let progress = std::fs::read_to_string(lab.dir.join("progress.toml")).unwrap();
    assert!(progress.contains("done = [\"who\"]"), "{progress}");
    lab.send("quit");
    assert_eq!(lab.finish(), 1, "quitting before the end is not a pass");
    assert!(!pid_alive(pid), "the workload is stopped");
    assert!(!scratch.exists(), "{} is removed", scratch.display());
}

/// A course in `dir`: (course file, learner ada's seed).
fn course(dir: &Path) -> (PathBuf, String) {
    let file = dir.join("course.toml");
    assert!(
        kdiag()
            .args(["course", "init", "--out"])
            .arg(&file)
            .status()
            .unwrap()
            .success()
    );
    let roster = dir.join("roster.csv");
    std::fs::write(&roster, "id\nada\n").unwrap();
    let out = kdiag()
        .args(["course", "seeds"])
        .arg(&roster)
        .arg("--course")
        .arg(&file)
        .output()
        .unwrap();
    let seed = stdout(&out)
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .nth(1)
        .unwrap()
        .to_string();
    (file, seed)
}

/// Record every answer of the reference but who.pid, from another
/// directory, with the profile saved under a relative name.
fn answer_all_but_the_pid(lab: &LabRun, course: &Path, pid: u64, cwd: &Path) {
    let out = kdiag()
        .args(["lab", "solution", "0-demo", "--learner", "ada", "--course"])
        .arg(course)
        .output()
        .unwrap();
    let mut table = String::new();
    for line in stdout(&out).lines() {
        if let Some(t) = line.strip_prefix('[') {
            table = t.trim_end_matches(']').to_string();
        } else if let Some((k, v)) = line.split_once(" = ")
            && table != "artifacts"
        {
            let key = format!("{table}.{k}");
            let out = kdiag()
                .args(["answer", "0-demo", &key, v.trim_matches('"'), "--dir"])
                .arg(lab.dir.parent().unwrap())
                .current_dir(cwd)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
        }
    }
    let ok = kdiag()
        .args([
            "profile",
            "-p",
            &pid.to_string(),
            "-d",
            "2",
            "-F",
            "499",
            "--folded",
            "p.folded",
        ])
        .current_dir(cwd)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(ok.success());
    let ok = kdiag()
        .args(["answer", "0-demo", "artifacts.profile", "p.folded", "--dir"])
        .arg(lab.dir.parent().unwrap())
        .current_dir(cwd)
        .status()
        .unwrap();
    assert!(ok.success());
}

/// `kdiag check` on the learner's own answers, as JSON.
fn graded(root: &Path, seed: &str) -> serde_json::Value {
    let out = kdiag()
        .args([
            "check", "0-demo", "--format", "json", "--seed", seed, "--dir",
        ])
        .arg(root)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn resuming_keeps_every_answer_and_redoes_only_live_checks() {
    if !require_root("resuming_keeps_every_answer_and_redoes_only_live_checks") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let (course, seed) = course(root.path());
    let mut lab = start(root.path(), &seed);
    let (pid, _) = workload(&lab);
    answer_all_but_the_pid(&lab, &course, pid, elsewhere.path());
    lab.answer("who.pid", &pid.to_string());
    lab.send("check");
    let seen = lab.expect("All steps done");
    assert!(!seen.contains("not yet"), "{seen}");
    let before = graded(root.path(), &seed);
    assert_eq!(before["score"], before["max_score"], "{before:#}");
    assert_eq!(lab.finish(), 0, "every step done");

    // Again: the workload has a new PID; only who.pid is asked again.
    let mut lab = start(root.path(), &seed);
    let (new_pid, _) = workload(&lab);
    assert_ne!(new_pid, pid);
    // The notice names the old PID, once; no step's text names it: the
    // dead process is no process to look at.
    // (Words of the text but its folder's name, random.)
    let dir = root.path().display().to_string();
    let names = |text: &str, n: u64| {
        text.replace(&dir, "")
            .split(|c: char| !c.is_ascii_digit())
            .filter(|w| *w == n.to_string())
            .count()
    };
    let said = lab.transcript.borrow().clone();
    assert!(said.contains(&format!("(it was PID {pid})")), "{said}");
    assert_eq!(names(&said, pid), 1, "{said}");
    let after = graded(root.path(), &seed);
    assert_eq!(after["score"], before["score"], "resuming keeps the score");
    lab.send("status");
    let seen = lab.expect("score ");
    for step in ["what", "why", "trend"] {
        assert!(
            seen.lines()
                .any(|l| l.contains(step) && l.ends_with("done")),
            "{step} still passes: {seen}"
        );
    }
    lab.send("check");
    let seen = lab.expect("score ");
    assert!(
        seen.contains("not yet: who.pid") && seen.contains("right: who.comm"),
        "{seen}"
    );
    lab.send("next");
    lab.expect("-- Step 2/4");
    let step2 = lab.expect("Questions");
    assert_eq!(names(&step2, pid), 0, "{step2}");
    lab.answer("who.pid", &new_pid.to_string());
    lab.send("check");
    lab.expect("All steps done");
    // Step 2's commands now name the running workload.
    lab.send("step");
    lab.expect("-- Step 2/4");
    let step2 = lab.expect("Questions");
    assert!(
        names(&step2, new_pid) > 0 && names(&step2, pid) == 0,
        "{step2}"
    );
    assert_eq!(lab.finish(), 0);

    // Submitted as an archive, the same answers get the same score from
    // check and from grade, anywhere.
    let tar = elsewhere.path().join("ada.tar");
    let out = kdiag()
        .args(["lab", "submit", "0-demo", "--learner", "ada", "--out"])
        .arg(&tar)
        .arg("--dir")
        .arg(root.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = kdiag()
        .args([
            "check",
            "0-demo",
            "--format",
            "json",
            "--seed",
            &seed,
            "--submission",
        ])
        .arg(&tar)
        .current_dir("/")
        .output()
        .unwrap();
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(c["score"], before["score"], "{c:#}");
    let out = kdiag()
        .args(["grade", "0-demo"])
        .arg(elsewhere.path())
        .arg("--course")
        .arg(&course)
        .current_dir(root.path())
        .output()
        .unwrap();
    let csv = stdout(&out);
    let row = csv
        .lines()
        .find(|l| l.starts_with("ada,"))
        .unwrap_or_else(|| panic!("{csv}"));
    let max = before["max_score"].as_f64().unwrap();
    assert!(row.contains(&format!(",{max},{max},")), "{row}");
}

/// The truth of `seed`'s variant, as `kdiag workload describe` gives it.
fn truth(seed: &str) -> serde_json::Value {
    let out = kdiag()
        .args(["workload", "describe", "io-app", "--seed", seed])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn plain_mode_wrong_answers_are_not_yet_without_the_answer() {
    if !require_root("plain_mode_wrong_answers_are_not_yet_without_the_answer") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let seed = "plain-run-4";
    let expect = truth(seed)["expect"].clone();
    let mut lab = start(root.path(), seed);
    let (pid, _) = workload(&lab);
    let wrong = [
        ("who.pid", "1"),
        ("who.comm", "systemd"),
        ("what.io_type", "R"),
        ("what.sync", "no"),
        ("why.syscall", "read"),
        ("why.function", "main"),
        ("why.file", "/etc/hostname"),
        ("artifacts.profile", "/etc/hostname"),
        ("trend.pattern", "random"),
        ("trend.region_bytes", "4096"),
    ];
    let region = expect["region_bytes"].as_u64().unwrap();
    let secrets = [
        pid.to_string(),
        expect["file"].as_str().unwrap().to_string(),
        expect["write_function"].as_str().unwrap().to_string(),
        region.to_string(),
        format!("{} MiB", region >> 20),
        // (The pattern is one of the choices every learner sees.)
        "WS".to_string(),
    ];
    for (key, value) in wrong {
        let reply = lab.reply(key, value);
        assert!(reply.starts_with(&format!("not yet: {key}: ")), "{reply}");
        for secret in &secrets {
            assert!(
                !reply.contains(secret.as_str()),
                "{reply} gives away {secret}"
            );
        }
    }
    lab.send("status");
    let seen = lab.expect("score ");
    assert!(seen.contains("score 0/15 points, 0/4 steps done"), "{seen}");
    lab.send("quit");
    assert_eq!(lab.finish(), 1);
}

#[test]
fn unreadable_answers_are_a_usage_error_with_their_position() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("0-demo");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("answers.toml"), "[who]\npid = = 4242\n").unwrap();
    let check = |format: &str| {
        kdiag()
            .args([
                "check", "0-demo", "--seed", "7", "--format", format, "--dir",
            ])
            .arg(root.path())
            .output()
            .unwrap()
    };
    let out = check("text");
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).contains("answers.toml:2:"), "{}", stdout(&out));
    let p: serde_json::Value = serde_json::from_slice(&check("prairielearn").stdout).unwrap();
    assert_eq!(p["gradable"], false);
    // And a key the lab does not know is refused at once.
    let out = kdiag()
        .args(["answer", "0-demo", "who.uid", "0", "--dir"])
        .arg(root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("who.pid"));
}

/// kdiag killed mid-lab: the kernel's parent-death signal stops the
/// workload, which removes its scratch files.
#[test]
fn killing_the_lab_stops_its_workload() {
    if !require_root("killing_the_lab_stops_its_workload") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let mut lab = start(root.path(), "kill-12");
    let (pid, scratch) = workload(&lab);
    // SAFETY: signalling the kdiag this test started.
    unsafe { libc::kill(lab.child.id() as i32, libc::SIGTERM) };
    lab.child.wait().unwrap();
    let t = Instant::now();
    while pid_alive(pid) && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!pid_alive(pid), "the workload outlived kdiag");
    while scratch.exists() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!scratch.exists(), "{} is left behind", scratch.display());
}

#[test]
fn list_shows_status_and_score_and_reset_clears_after_asking() {
    let root = tempfile::tempdir().unwrap();
    let list = || {
        let out = kdiag()
            .args(["lab", "list", "--dir"])
            .arg(root.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        stdout(&out)
    };
    let text = list();
    let head = text.lines().next().unwrap();
    for col in ["LAB", "TITLE", "WORKLOAD", "STATUS", "SCORE", "START"] {
        assert!(head.contains(col), "{text}");
    }
    let row = text.lines().find(|l| l.starts_with("0-demo")).unwrap();
    assert!(
        row.contains("io-app") && row.contains("not started"),
        "{row}"
    );
    assert!(row.contains("0/15"), "{row}");
    // The command to start it, runnable as printed (kdiag by its path
    // when a shell would not find it).
    assert!(
        row.contains("sudo /")
            && row.contains(&format!("kdiag lab 0-demo --dir {}", root.path().display())),
        "{row}"
    );

    // One right answer (no workload needed: comm is the seed's truth).
    let out = kdiag()
        .args(["answer", "0-demo", "who.comm", "io-app", "--dir"])
        .arg(root.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = list();
    let row = text.lines().find(|l| l.starts_with("0-demo")).unwrap();
    assert!(row.contains("in progress") && row.contains("1/15"), "{row}");

    // Reset asks; without a terminal to ask on, it needs --yes.
    let answers = root.path().join("0-demo/answers.toml");
    let out = kdiag()
        .args(["lab", "reset", "0-demo", "--dir"])
        .arg(root.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--yes"),
        "{out:?}"
    );
    assert!(answers.exists(), "nothing cleared without a yes");
    let out = kdiag()
        .args(["lab", "reset", "0-demo", "--yes", "--dir"])
        .arg(root.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(stdout(&out).contains("answers.toml"), "{}", stdout(&out));
    assert!(!answers.exists());
    let text = list();
    assert!(text.contains("not started"), "{text}");
}

/// Two labs' evidence made with the commands their steps suggest, in the
/// same folder: doing 7-trend after 1-io leaves 1-io's score and status as
/// they were, and `lab list`'s status follows the score.
#[test]
fn one_labs_evidence_never_changes_anothers_score() {
    let root = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let seed = "evidence-names-1";
    let run = |args: &[&str]| {
        let out = kdiag()
            .args(args)
            .arg("--dir")
            .arg(root.path())
            .current_dir(cwd.path())
            .env("KDIAG_SEED", seed)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        stdout(&out)
    };
    let row = |lab: &str| {
        let list = run(&["lab", "list"]);
        let row = list.lines().find(|l| l.starts_with(lab)).unwrap();
        row.to_string()
    };
    let truth = |workload: &str, args: &[&str]| {
        let out = kdiag()
            .args(["workload", "describe", "--seed", seed, workload])
            .args(args)
            .output()
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["expect"].clone()
    };
    let text = |v: &serde_json::Value| v.as_str().map_or(v.to_string(), str::to_string);
    // The evidence file the step tells the learner to record.
    let evidence_name = |lab: &str| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("labs/{lab}/steps/3-why.md"));
        let step = std::fs::read_to_string(path).unwrap();
        let after = step.split_once("artifacts.profile ").unwrap().1;
        after
            .split(|c: char| c.is_whitespace() || c == '`')
            .next()
            .unwrap()
            .to_string()
    };

    let io = truth("io-stall", &[]);
    let folded = evidence_name("1-io");
    assert!(folded.starts_with("1-io"), "{folded}");
    std::fs::write(
        cwd.path().join(&folded),
        format!("io-stall;main;{} 40\n", text(&io["dirty_function"])),
    )
    .unwrap();
    for (key, value) in [
        ("who.writer", "kworker".to_string()),
        ("who.comm", "io-stall".into()),
        ("what.period_s", text(&io["period_s"])),
        ("what.burst_bytes", text(&io["burst_bytes"])),
        ("why.function", text(&io["dirty_function"])),
        ("why.file", text(&io["file"])),
        ("why.syscall", "syncfs".into()),
        ("trend.pattern", "periodic".into()),
        ("trend.without_sync", "after about 30 s".into()),
        ("artifacts.profile", folded.clone()),
    ] {
        run(&["answer", "1-io", key, &value]);
    }
    let before = row("1-io");
    assert!(
        before.contains(" done ") && before.contains("16/16"),
        "{before}"
    );

    let leak = truth("mem-leak", &["--cap", "4G"]);
    let folded = evidence_name("7-trend");
    assert!(folded.starts_with("7-trend"), "{folded}");
    std::fs::write(
        cwd.path().join(&folded),
        format!(
            "mem-leak;{};asm_exc_page_fault 6\n",
            text(&leak["leak_function"])
        ),
    )
    .unwrap();
    run(&["answer", "7-trend", "artifacts.profile", &folded]);
    assert_eq!(row("1-io"), before, "7-trend's evidence left 1-io alone");
    let trend = row("7-trend");
    assert!(trend.contains("in progress"), "{trend}");

    // The status is the score's: 1-io's evidence gone, it is not done.
    std::fs::remove_file(cwd.path().join(evidence_name("1-io"))).unwrap();
    let after = row("1-io");
    assert!(
        after.contains("in progress") && after.contains("14/16"),
        "{after}"
    );
}
