//! `kdiag lab`, `answer`, `check` and `grade`: a real lab run with its
//! workload, the reference answers checked against it, autograder formats,
//! and grading a class's worth of submissions.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use common::{kdiag, require_root, stdout};

/// `kdiag lab 0-demo` running with piped input; its output lines arrive on
/// a channel. Dropping it closes stdin (the lab quits) and reaps kdiag.
struct LabRun {
    _one: std::sync::MutexGuard<'static, ()>,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    dir: PathBuf,
}

/// One lab at a time: every run of io-app uses the same scratch directory,
/// and a second one refuses to start while the first runs.
static ONE_WORKLOAD: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl LabRun {
    fn start(root: &Path, seed: u64) -> LabRun {
        let guard = ONE_WORKLOAD.lock().unwrap_or_else(|e| e.into_inner());
        let mut child = kdiag()
            .args(["lab", "0-demo", "--seed", &seed.to_string(), "--dir"])
            .arg(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            // The prompt has no newline: split on it too.
            for line in out.lines().map_while(Result::ok) {
                for part in line.split(" > ") {
                    let _ = tx.send(part.to_string());
                }
            }
        });
        let run = LabRun {
            _one: guard,
            stdin: child.stdin.take(),
            child,
            lines,
            dir: root.join("0-demo"),
        };
        run.expect("Step 1/4");
        run
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin.as_mut().unwrap(), "{line}").unwrap();
    }

    /// Wait for a line containing `what`; the lines seen on the way.
    fn expect(&self, what: &str) -> String {
        let mut seen = String::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            match self.lines.recv_timeout(Duration::from_millis(200)) {
                Ok(l) => {
                    seen.push_str(&l);
                    seen.push('\n');
                    if l.contains(what) {
                        return seen;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(_) => break,
            }
        }
        panic!("no {what:?} from kdiag lab; it printed:\n{seen}");
    }

    fn session(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(self.dir.join("session.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    /// The workload's PID, from the session, and its scratch directory:
    /// where the file the truth names is open (the truth names files, not
    /// paths).
    fn workload(&self) -> (u64, PathBuf) {
        let s = self.session();
        let pid = s["pid"].as_u64().unwrap();
        let file = s["truth"]["expect"]["file"].as_str().unwrap().to_string();
        let mut found = None;
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while found.is_none() && std::time::Instant::now() < end {
            found = std::fs::read_dir(format!("/proc/{pid}/fd"))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .find(|t| t.file_name().is_some_and(|n| n == file.as_str()));
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let path = found.unwrap_or_else(|| panic!("{pid} holds no file named {file}"));
        (pid, path.parent().unwrap().to_path_buf())
    }

    fn answer(&self, key: &str, value: &str) {
        let out = kdiag()
            .args(["answer", "0-demo", key, value, "--dir"])
            .arg(self.dir.parent().unwrap())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }

    /// Close stdin (the lab quits) and return kdiag's exit code.
    fn finish(mut self) -> i32 {
        drop(self.stdin.take());
        self.child.wait().unwrap().code().unwrap_or(-1)
    }
}

fn pid_alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

#[test]
fn lab_checks_a_step_and_leaves_nothing_behind() {
    if !require_root("lab_checks_a_step_and_leaves_nothing_behind") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let mut lab = LabRun::start(root.path(), 11);
    let (pid, scratch) = lab.workload();
    assert!(pid_alive(pid), "the workload runs");
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm.trim(), "io-app");

    // A wrong answer fails without giving the right one away.
    lab.answer("who.pid", "1");
    lab.answer("who.comm", "io-app");
    lab.send("c");
    let seen = lab.expect("checks passed");
    assert!(seen.contains("FAIL who.pid"), "{seen}");
    assert!(seen.contains("ok   who.comm"), "{seen}");
    assert!(!seen.contains(&pid.to_string()), "{seen}");
    lab.send("h");
    lab.expect("who.pid: ");

    lab.answer("who.pid", &pid.to_string());
    lab.send("c");
    let seen = lab.expect("Step 2/4");
    assert!(seen.contains("Step done."), "{seen}");
    assert_eq!(
        std::fs::read_to_string(lab.dir.join("progress")).unwrap(),
        "who\n"
    );
    lab.send("q");
    assert_eq!(lab.finish(), 1, "quitting before the end is not a pass");
    assert!(!pid_alive(pid), "the workload is stopped");
    assert!(!scratch.exists(), "{} is removed", scratch.display());
}

#[test]
fn reference_answers_pass_and_empty_answers_fail() {
    if !require_root("reference_answers_pass_and_empty_answers_fail") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let lab = LabRun::start(root.path(), 4);
    let (pid, _) = lab.workload();
    let file = lab.session()["truth"]["expect"]["file"]
        .as_str()
        .unwrap()
        .to_string();
    // The artifact the reference answers point at: a real trace.
    let trace = std::fs::File::create(lab.dir.join("iosnoop.json")).unwrap();
    let ok = kdiag()
        .args(["iosnoop", "--json", "-p", &pid.to_string(), "2"])
        .stdout(trace)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(ok.success());
    let check = |extra: &[&str]| {
        kdiag()
            .args(["check", "0-demo", "--dir"])
            .arg(root.path())
            .args(extra)
            .output()
            .unwrap()
    };

    let out = check(&["--solution"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).ends_with("9/9 checks passed, 13/13 points\n"));
    let out = check(&["--solution", "--format", "gradescope"]);
    let g: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(g["score"], 13.0);
    assert_eq!(g["tests"].as_array().unwrap().len(), 9);
    let out = check(&["--solution", "--format", "prairielearn"]);
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (p["gradable"].as_bool(), p["score"].as_f64()),
        (Some(true), Some(1.0))
    );

    // No answers: every check fails, exit 1, and no message names the truth.
    let out = check(&[]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.ends_with("0/9 checks passed, 0/13 points\n"), "{text}");
    assert!(
        !text.contains(&file) && !text.contains(&pid.to_string()),
        "{text}"
    );
    let out = check(&["--format", "junit"]);
    let xml = stdout(&out);
    assert!(
        xml.contains("tests=\"9\" failures=\"9\" errors=\"0\""),
        "{xml}"
    );
    assert_eq!(xml.matches("<testcase ").count(), 9);
    // One check alone, for a command grader.
    let out = check(&["--solution", "--only", "why.file"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).ends_with("1/1 checks passed, 2/2 points\n"));
    assert_eq!(lab.finish(), 1);
}

/// A session as `kdiag lab` writes it, from the workload's real ground
/// truth for `seed` (no workload needed to grade).
fn write_session(dir: &Path, seed: u64, pid: u32) -> serde_json::Value {
    let out = kdiag()
        .args([
            "workload",
            "describe",
            "io-app",
            "--seed",
            &seed.to_string(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let truth: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    let session = serde_json::json!({
        "lab": "0-demo", "seed": seed, "pid": pid, "dir": dir, "truth": truth,
    });
    std::fs::write(dir.join("session.json"), session.to_string()).unwrap();
    truth
}

#[test]
fn unreadable_answers_are_a_usage_error_with_their_position() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("0-demo");
    write_session(&dir, 1, 4242);
    std::fs::write(dir.join("answers.toml"), "[who]\npid = = 4242\n").unwrap();
    let out = kdiag()
        .args(["check", "0-demo", "--dir"])
        .arg(root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).contains("answers.toml:2:"), "{}", stdout(&out));
    let out = kdiag()
        .args(["check", "0-demo", "--format", "prairielearn", "--dir"])
        .arg(root.path())
        .output()
        .unwrap();
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
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

#[test]
fn grades_two_hundred_submissions() {
    let root = tempfile::tempdir().unwrap();
    // Ten seeds' ground truth, shared by twenty students each.
    let truths: Vec<serde_json::Value> = (0..10)
        .map(|seed| {
            write_session(
                &root.path().join(format!("seed-{seed}")),
                seed,
                1000 + seed as u32,
            )
        })
        .collect();
    let subs = root.path().join("submissions");
    for n in 0..200u32 {
        let seed = (n % 10) as u64;
        let dir = subs.join(format!("student-{n:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(
            root.path().join(format!("seed-{seed}/session.json")),
            dir.join("session.json"),
        )
        .unwrap();
        let expect = &truths[seed as usize]["expect"];
        // Even students (even seeds) answer for their own seed; odd ones
        // copy seed 0's file name, which is wrong for their odd seeds.
        let file = if n % 2 == 0 {
            expect["file"].as_str().unwrap().to_string()
        } else {
            truths[0]["expect"]["file"].as_str().unwrap().to_string()
        };
        let answers = format!(
            "[who]\npid = {}\ncomm = \"io-app\"\n[why]\nfile = \"{file}\"\n",
            1000 + seed
        );
        std::fs::write(dir.join("answers.toml"), answers).unwrap();
    }
    // One broken submission.
    std::fs::create_dir_all(subs.join("student-zzz")).unwrap();
    let out = kdiag()
        .args(["grade", "0-demo"])
        .arg(&subs)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let csv = stdout(&out);
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows[0], "submission,score,max_score,passed,failed,error");
    assert_eq!(rows.len(), 202);
    // who.pid 2 + who.comm 1 + why.file 2 = 5 of 13.
    assert!(rows.contains(&"student-000,5,13,3,6,"), "{csv}");
    assert!(rows.contains(&"student-003,3,13,2,7,"), "{csv}");
    let broken = rows.iter().find(|r| r.starts_with("student-zzz,")).unwrap();
    assert!(broken.contains("session.json"), "{broken}");
}

/// kdiag killed mid-lab: the kernel's parent-death signal stops the
/// workload, which removes its scratch files.
#[test]
fn killing_the_lab_stops_its_workload() {
    if !require_root("killing_the_lab_stops_its_workload") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let mut lab = LabRun::start(root.path(), 12);
    let (pid, scratch) = lab.workload();
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
