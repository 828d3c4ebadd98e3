//! How a lab ends, in both modes, as README's exit-code table says: leaving
//! (q, `quit`, end of input, Ctrl-C) exits 0 when every step is done and 1
//! when not; SIGTERM interrupts (143); the workload never outlives kdiag.
//! (A finished lab left with Ctrl-C: tests/course_app.rs in the app,
//! tests/course in plain mode.) And plain mode under a real `sudo … | tee
//! log`, typed on a terminal by the unprivileged learner.

mod common;

use std::time::Duration;

use common::lab_run::{LabRun, one_workload, pid_alive, workload_pid};
use common::{LEARNER, Tmux, learner, require_root};

/// Signal `sig` to the plain lab, then its exit code and what it said on
/// stderr; the workload is gone.
fn plain_ended_by(sig: i32, seed: &str) -> (i32, String) {
    let root = tempfile::tempdir().unwrap();
    let lab = LabRun::start("0-demo", root.path(), seed);
    let pid = lab.pid();
    lab.expect("Questions");
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(lab.child.id() as i32, sig) };
    let ended = lab.finish_with_stderr();
    assert!(!pid_alive(pid), "the workload outlived the lab");
    ended
}

#[test]
fn plain_mode_ctrl_c_leaves_as_quit_does_and_sigterm_interrupts() {
    if !require_root("plain_mode_ctrl_c_leaves_as_quit_does_and_sigterm_interrupts") {
        return;
    }
    assert_eq!(plain_ended_by(libc::SIGINT, "exits-int").0, 1, "unfinished");
    let (code, said) = plain_ended_by(libc::SIGTERM, "exits-term");
    assert_eq!(code, 143);
    // The signal named once, and what stays.
    assert_eq!(said.matches("SIGTERM").count(), 1, "{said}");
    assert!(
        !said.contains("signal 15") && said.contains("your answers and progress stay in"),
        "{said}"
    );
}

#[test]
fn app_ctrl_c_leaves_as_q_does_and_clears_its_frame() {
    if !require_root("app_ctrl_c_leaves_as_q_does_and_clears_its_frame") {
        return;
    }
    let _one = one_workload();
    let root = tempfile::tempdir().unwrap();
    let t = Tmux::start_sized(
        &format!(
            "{} lab 0-demo --seed exits-app --dir {}; echo EXITED rc=$?; sleep 600",
            env!("CARGO_BIN_EXE_kdiag"),
            root.path().display()
        ),
        80,
        24,
    );
    let pid = workload_pid(root.path(), "0-demo");
    t.wait_for("the welcome", |s| s.contains("Press any key to start"));
    t.keys(&["Space"]);
    t.wait_for("the first step", |s| s.contains("Step 1/"));
    // A window made larger, then smaller than at the start, while the app
    // runs: nothing of its last frame stays on the terminal after it.
    t.resize(100, 30);
    t.wait_for("the frame redrawn", |s| {
        s.lines().next().is_some_and(|l| l.chars().count() > 80)
    });
    t.resize(70, 20);
    // Redrawn, not cut by the terminal: the title bar ends with the score
    // within the 70 columns.
    t.wait_for("the frame redrawn smaller", |s| {
        s.lines().next().is_some_and(|l| {
            let l = l.trim_end();
            l.ends_with("steps done") && l.chars().count() <= 70
        })
    });
    t.keys(&["C-c"]);
    let s = t.wait_for("kdiag to end", |s| s.contains("EXITED rc="));
    assert!(s.contains("EXITED rc=1"), "unfinished:\n{s}");
    assert!(
        !s.contains('│') && !s.contains("Step 1/"),
        "the app's frame stays on screen:\n{s}"
    );
    assert!(!pid_alive(pid.into()), "the workload outlived the lab");
}

/// `sudo kdiag lab 0-demo --plain | tee log` typed by the learner in their
/// shell on a terminal (sudo's use_pty gives kdiag a terminal of its own):
/// the commands typed reach kdiag, its replies reach both the screen and
/// the log, and `quit` ends it with the exit code of an unfinished lab.
#[test]
fn plain_mode_under_sudo_with_tee() {
    if learner("plain_mode_under_sudo_with_tee").is_none() {
        return;
    }
    let _one = one_workload();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let (uid, gid) = learner("plain_mode_under_sudo_with_tee").unwrap();
    std::os::unix::fs::chown(dir, Some(uid), Some(gid)).unwrap();
    let log = dir.join("log");
    // The learner's interactive shell, in a terminal; the command typed
    // there as they would.
    let t = Tmux::start_sized(
        &format!("sudo -n -u {LEARNER} bash --norc --noprofile -i; sleep 600"),
        100,
        30,
    );
    t.wait_for("the learner's shell", |s| s.contains('$'));
    let line = format!(
        "cd {dir} && sudo -n {bin} lab 0-demo --plain --seed exits-tee --dir {dir} | tee {log}; \
         echo EXITED rc=${{PIPESTATUS[0]}}",
        dir = dir.display(),
        bin = env!("CARGO_BIN_EXE_kdiag"),
        log = log.display()
    );
    t.keys(&["-l", &line]);
    t.keys(&["Enter"]);
    t.wait_up_to(Duration::from_secs(30), "the first step", |s| {
        s.contains("lab>")
    });
    t.keys(&["status", "Enter"]);
    t.wait_for("the reply to status", |s| s.contains("score 0/15 points"));
    t.keys(&["quit", "Enter"]);
    let s = t.wait_up_to(Duration::from_secs(30), "kdiag to end", |s| {
        s.contains("EXITED rc=")
    });
    assert!(
        s.contains("EXITED rc=1"),
        "unfinished, left with quit:\n{s}"
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("-- Step 1/4") && logged.contains("score 0/15 points"),
        "the log has the replies:\n{logged}"
    );
}

/// `--log FILE` through a real sudo, typed by the learner in a terminal
/// from a shell without job control (`bash -c` as the pane's command,
/// where `| tee` leaves kdiag a terminal it may not read): through `| tee`
/// kdiag says to use `--log` instead; with `--log` the commands typed
/// reach it, and the file, the learner's own, holds what it printed and
/// what they typed.
#[test]
fn plain_mode_log_under_sudo_as_the_learner() {
    let Some((uid, gid)) = learner("plain_mode_log_under_sudo_as_the_learner") else {
        return;
    };
    let _one = one_workload();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    std::os::unix::fs::chown(dir, Some(uid), Some(gid)).unwrap();
    let log = dir.join("lab.log");
    let lab = |tail: &str| {
        Tmux::start_sized(
            &format!(
                "sudo -n -u {LEARNER} bash -c 'cd {dir} && sudo -n {bin} lab 0-demo --plain \
                 --seed exits-log --dir {dir}{tail}'; sleep 600",
                dir = dir.display(),
                bin = env!("CARGO_BIN_EXE_kdiag"),
            ),
            100,
            30,
        )
    };
    // Through | tee: when sudo keeps the terminal from kdiag, it says
    // what to do instead.
    let t = lab(&format!(
        " | tee {}; echo EXITED rc=${{PIPESTATUS[0]}}",
        dir.join("tee.log").display()
    ));
    let s = t.wait_up_to(Duration::from_secs(30), "kdiag to start", |s| {
        s.contains("EXITED rc=") || s.contains("lab>")
    });
    if s.contains("EXITED rc=") {
        assert!(
            s.contains("EXITED rc=2") && s.contains("--plain --log FILE"),
            "says to use --log:\n{s}"
        );
    } else {
        t.keys(&["quit", "Enter"]);
        t.wait_up_to(Duration::from_secs(30), "kdiag to end", |s| {
            s.contains("EXITED rc=")
        });
    }
    drop(t);
    // With --log: typed commands work, and the transcript has both sides.
    let t = lab(&format!(" --log {}; echo EXITED rc=$?", log.display()));
    t.wait_up_to(Duration::from_secs(30), "the first step", |s| {
        s.contains("lab>")
    });
    t.keys(&["status", "Enter"]);
    t.wait_for("the reply to status", |s| s.contains("score 0/15 points"));
    t.keys(&["quit", "Enter"]);
    let s = t.wait_up_to(Duration::from_secs(30), "kdiag to end", |s| {
        s.contains("EXITED rc=")
    });
    assert!(
        s.contains("EXITED rc=1"),
        "unfinished, left with quit:\n{s}"
    );
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        std::fs::metadata(&log).unwrap().uid(),
        uid,
        "the learner's file"
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    for want in [
        "== Lab 0-demo",
        "-- Step 1/4",
        "lab> status",
        "score 0/15 points",
        "lab> quit",
        "Score 0/15 points",
    ] {
        assert!(logged.contains(want), "{want}: the transcript:\n{logged}");
    }
}

/// `kdiag lab --list` is `kdiag lab list`.
#[test]
fn lab_dash_dash_list_is_lab_list() {
    let root = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kdiag"))
            .arg("lab")
            .args(args)
            .arg("--dir")
            .arg(root.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let listed = run(&["list"]);
    assert!(
        listed.contains("0-demo") && listed.contains("7-trend"),
        "{listed}"
    );
    assert_eq!(run(&["--list"]), listed);
}
