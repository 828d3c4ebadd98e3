//! `kdiag lab 0-demo` as a learner meets it: the interactive app in a
//! 120x40 terminal (tmux), answered by keys alone, and every way out
//! (q, a closed terminal, SIGTERM) leaving no workload, no scratch files,
//! no BPF program and no perf event behind.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use common::bpf_programs;
use common::lab_run::pid_alive;
use common::{Tmux, kdiag, require_root, scratch_of};

/// One lab at a time: io-app's scratch directory is shared.
static ONE_WORKLOAD: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// kdiag lab 0-demo in a 120x40 pane; after it, the shell says how it ended.
fn start(root: &Path, seed: &str) -> Tmux {
    start_lab("0-demo", root, seed)
}

fn start_lab(lab: &str, root: &Path, seed: &str) -> Tmux {
    let bin = env!("CARGO_BIN_EXE_kdiag");
    Tmux::start_sized(
        &format!(
            "{bin} lab {lab} --seed {seed} --dir {}; echo EXITED rc=$?; sleep 600",
            root.display()
        ),
        120,
        40,
    )
}

/// The workload's PID from the lab's notes, once written.
fn workload_pid(root: &Path) -> u32 {
    common::lab_run::workload_pid(root, "0-demo")
}

/// Perf events and BPF objects held by process `pid` (from its fd links).
fn tracing_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|l| {
                    let l = l.to_string_lossy();
                    l.contains("perf_event") || l.contains("bpf")
                })
                .count()
        })
        .unwrap_or(0)
}

/// kdiag: the pane's shell's child.
fn kdiag_pid(t: &Tmux) -> u32 {
    let sh = t.pane_pid();
    let children = std::fs::read_to_string(format!("/proc/{sh}/task/{sh}/children")).unwrap();
    children
        .split_whitespace()
        .next()
        .expect("kdiag runs")
        .parse()
        .unwrap()
}

/// Wait until nothing of the lab is left: kdiag ended, the workload gone,
/// its scratch folder removed, none of the BPF programs it `loaded` left.
fn nothing_left(kdiag: u32, workload: u32, scratch: &Path, loaded: &BTreeSet<u64>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    // The kernel frees a program whose last descriptor closed a moment
    // later (after an RCU grace period): wait for that too.
    let programs_left = || !bpf_programs::loaded().is_disjoint(loaded);
    while (pid_alive(kdiag as u64)
        || pid_alive(workload as u64)
        || scratch.exists()
        || programs_left())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!pid_alive(kdiag as u64), "kdiag still runs");
    assert!(!pid_alive(workload as u64), "the workload outlived the lab");
    assert!(!scratch.exists(), "{} is left behind", scratch.display());
    let left: Vec<_> = bpf_programs::loaded()
        .intersection(loaded)
        .copied()
        .collect();
    assert!(left.is_empty(), "BPF programs left: {left:?} of {loaded:?}");
    // No process holds a perf event or BPF object it got from kdiag: the
    // only holder was kdiag, and it is gone.
    assert_eq!(tracing_fds(kdiag), 0);
}

/// The row of `pid` in the process table, counted from the first row.
fn row_of(screen: &str, pid: u32) -> Option<usize> {
    let mut lines = screen
        .lines()
        .skip_while(|l| !(l.contains("PID") && l.contains("WRITE/s")));
    lines.next()?;
    lines.position(|l| {
        l.split('│')
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            == Some(&pid.to_string())
    })
}

/// The column the process table is sorted by, as its summary line says.
fn sorted_by(screen: &str) -> Option<String> {
    let rest = screen.split_once("sorted by ")?.1;
    let end = rest.find(['▼', '▲', ' '])?;
    Some(rest[..end].to_string())
}

/// Press s until the table is sorted by `title`, one press at a time: each
/// waits for the screen to show its effect, so a slow redraw under load
/// never makes the test press past the column.
fn sort_by(t: &Tmux, title: &str) {
    let shown = |s: &str| sorted_by(s).unwrap_or_default();
    let mut now = shown(&t.wait_for("the process table", |s| sorted_by(s).is_some()));
    // The table has 11 columns: twelve presses come back round.
    for _ in 0..12 {
        if now == title {
            return;
        }
        t.keys(&["s"]);
        let before = now.clone();
        now = shown(&t.wait_for("the next sort column", |s| {
            sorted_by(s).is_some_and(|c| c != before)
        }));
    }
    panic!("s never sorted by {title} (last: {now})");
}

/// The truth of `seed`'s variant.
fn expect(seed: &str) -> serde_json::Value {
    let out = kdiag()
        .args(["workload", "describe", "io-app", "--seed", seed])
        .output()
        .unwrap();
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["expect"].clone()
}

fn type_answer(t: &Tmux, text: &str) {
    t.keys(&["Enter"]);
    t.keys(&["-l", text]);
    t.keys(&["Enter"]);
}

#[test]
fn a_learner_answers_every_step_by_keys_and_leaves_nothing() {
    if !require_root("a_learner_answers_every_step_by_keys_and_leaves_nothing") {
        return;
    }
    let _one = ONE_WORKLOAD.lock().unwrap_or_else(|e| e.into_inner());
    let root = tempfile::tempdir().unwrap();
    let seed = "app-run-5";
    let truth = expect(seed);
    let t = start(root.path(), seed);
    let pid = workload_pid(root.path());
    let scratch = scratch_of(pid as u64);
    let kd = kdiag_pid(&t);

    // The welcome, then the process table with the workload in it (sorted
    // by WRITE/s with s) within five seconds.
    t.wait_for("the welcome", |s| s.contains("Press any key to start"));
    t.keys(&["Space"]);
    t.keys(&["s"]);
    let s = t.wait_up_to(Duration::from_secs(5), "the workload in the table", |s| {
        row_of(s, pid).is_some() && s.contains("WRITE/s▼")
    });
    assert!(s.contains("○ 1. Who is causing"), "{s}");
    // The process table reads /proc only: no tracing for it.
    assert_eq!(
        bpf_programs::held_by(kd),
        BTreeSet::new(),
        "no BPF program for the process table"
    );
    assert_eq!(tracing_fds(kd), 0, "no perf event for the process table");
    let row = row_of(&s, pid).unwrap();
    t.keys(&["Home"]);
    for _ in 0..row {
        t.keys(&["Down"]);
    }
    t.keys(&["Enter"]);
    // The whole frame, not its first lines: tmux can be read while the
    // app is still writing the lines below the score.
    let answered = format!("✓ PID of the process causing the disk load: {pid}");
    let s = t.wait_for("step 1 done", |s| {
        s.contains("score 1/15") && s.contains(&answered)
    });
    assert!(s.contains("── Done: what you found ──"), "{s}");

    // Step 2: the iosnoop panel traces (BPF), the answers are typed.
    t.keys(&["n"]);
    t.wait_for("the process's requests", |s| {
        s.contains(&format!("{pid} WS"))
    });
    let mut loaded = bpf_programs::held_by(kd);
    assert!(!loaded.is_empty(), "iosnoop runs for its panel");
    // A read for writes (W alone would be right for WS: grade/policy.rs).
    type_answer(&t, "R");
    let s = t.wait_for("a wrong answer", |s| {
        s.contains("not yet: this answer is not the operation")
    });
    assert!(!s.contains("WS  2 pts"), "{s}");
    t.keys(&["h"]);
    t.wait_for("the hint", |s| s.contains("hint: "));
    t.keys(&["Enter", "BSpace"]);
    t.keys(&["-l", "WS"]);
    t.keys(&["Enter"]);
    t.wait_for("io_type right", |s| {
        s.contains("✓ Type of its block requests")
    });
    // sync: no choice shown until one is picked; the first is yes.
    assert!(t.screen().contains("◂ ← → to choose ▸"));
    t.keys(&["Right", "Enter"]);
    t.wait_for("step 2 done", |s| s.contains("score 4/15"));

    // Step 3: the profile panel; typed answers and the saved stacks.
    t.keys(&["n"]);
    t.wait_for("the profile", |s| s.contains("Top functions by self time"));
    assert_eq!(
        bpf_programs::held_by(kd),
        BTreeSet::new(),
        "iosnoop stopped with its panel"
    );
    assert!(tracing_fds(kd) > 0, "the profile's perf events");
    loaded.extend(bpf_programs::held_by(kd));
    let file = truth["file"].as_str().unwrap();
    type_answer(&t, truth["syscall"].as_str().unwrap());
    t.wait_for("syscall right", |s| s.contains("✓ System call"));
    type_answer(&t, truth["write_function"].as_str().unwrap());
    t.wait_for("function right", |s| {
        s.contains("✓ Function of the program")
    });
    type_answer(&t, file);
    t.wait_for("file right", |s| s.contains("✓ File it writes to"));
    // Enter opens the path's box; Enter alone saves the panel's stacks.
    t.keys(&["Enter"]);
    t.wait_for("the path's box", |s| s.contains("Enter alone saves"));
    t.keys(&["Enter"]);
    t.wait_for("step 3 done", |s| s.contains("score 12/15"));
    let saved = root.path().join("0-demo/profile.folded");
    let folded = std::fs::read_to_string(&saved).unwrap();
    assert!(folded.starts_with("io-app;"), "{folded}");

    // Step 4: trend, then the pattern as a choice and the size typed.
    t.keys(&["n"]);
    t.wait_for("the trend", |s| s.contains("storage I/O: now"));
    assert_eq!(tracing_fds(kd), 0, "the profile stopped with its panel");
    t.keys(&["Right", "Right", "Right", "Enter"]);
    t.wait_for("pattern right", |s| s.contains("✓ Access pattern"));
    type_answer(&t, &truth["region_bytes"].to_string());
    let s = t.wait_for("the final screen", |s| s.contains("Lab complete"));
    assert!(
        s.contains("Score: 15 of 15 points, 4 of 4 steps done"),
        "{s}"
    );
    assert!(s.contains("score 15/15 · 4/4 steps done"), "{s}");

    // The answers are the grader's: kdiag check agrees.
    let out = kdiag()
        .args(["check", "0-demo", "--seed", seed, "--dir"])
        .arg(root.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");

    t.keys(&["q"]);
    let s = t.wait_for("kdiag to end", |s| s.contains("EXITED rc="));
    assert!(s.contains("EXITED rc=0"), "{s}");
    assert!(s.contains("Score 15/15 points"), "{s}");
    nothing_left(kd, pid, &scratch, &loaded);
}

/// Lab 6-lock's why step: the off-CPU panel shows where the workers wait
/// (the seed's lock function, futex), Enter saves its stacks as the
/// evidence the check wants, and the panel's BPF programs go with it.
#[test]
fn the_offcpu_panel_shows_where_threads_wait_and_saves_them() {
    if !require_root("the_offcpu_panel_shows_where_threads_wait_and_saves_them") {
        return;
    }
    let _one = ONE_WORKLOAD.lock().unwrap_or_else(|e| e.into_inner());
    let root = tempfile::tempdir().unwrap();
    let seed = "app-lock-2";
    let truth = kdiag()
        .args(["workload", "describe", "lock-contend", "--seed", seed])
        .output()
        .unwrap();
    let truth: serde_json::Value = serde_json::from_slice(&truth.stdout).unwrap();
    let function = truth["expect"]["lock_function"].as_str().unwrap();
    let t = start_lab("6-lock", root.path(), seed);
    let file = root.path().join("6-lock/progress.toml");
    let deadline = Instant::now() + Duration::from_secs(10);
    let pid: u32 = loop {
        if let Some(pid) = std::fs::read_to_string(&file)
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("pid = ")?.trim().parse().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "no pid");
        std::thread::sleep(Duration::from_millis(50));
    };
    let kd = kdiag_pid(&t);
    t.wait_for("the welcome", |s| s.contains("Press any key to start"));
    t.keys(&["Space"]);
    // Sorted by voluntary switches, as the step says: the waiting workers
    // put it on top whatever else runs.
    sort_by(&t, "VCSW/s");
    let s = t.wait_up_to(Duration::from_secs(5), "the workload in the table", |s| {
        sorted_by(s) == Some("VCSW/s".into()) && row_of(s, pid).is_some()
    });
    let row = row_of(&s, pid).unwrap();
    t.keys(&["Home"]);
    for _ in 0..row {
        t.keys(&["Down"]);
    }
    t.keys(&["Enter"]);
    t.wait_for("the process picked", |s| s.contains("score 1/14"));
    // Step 3, its first panel: off-CPU stacks within a window or two.
    t.keys(&["n", "n"]);
    let s = t.wait_up_to(Duration::from_secs(15), "the blocking paths", |s| {
        s.contains("Top blocking paths") && s.contains(function)
    });
    assert!(s.contains("futex"), "{s}");
    // Attached for each window (between two, for an instant, not).
    let deadline = Instant::now() + Duration::from_secs(3);
    while tracing_fds(kd) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(tracing_fds(kd) > 0, "the off-CPU programs attached");
    // The step's answers, read off the panel; then the evidence question
    // saves the window.
    type_answer(&t, function);
    t.wait_for("function right", |s| s.contains("✓ Program function"));
    type_answer(&t, "clock_nanosleep");
    t.wait_for("holder right", |s| s.contains("✓ System call the lock"));
    // Enter opens the path's box (what is typed next is the path, never
    // keys); Enter alone saves the panel's stacks.
    t.keys(&["Enter"]);
    t.wait_for("the path's box", |s| s.contains("Enter alone saves"));
    t.keys(&["Enter"]);
    t.wait_for("the stacks saved", |s| {
        s.contains("✓ Saved off-CPU profile")
    });
    let folded = std::fs::read_to_string(root.path().join("6-lock/offcpu.folded")).unwrap();
    assert!(
        folded.contains(function) && folded.contains("futex"),
        "{folded}"
    );
    // Leaving the step stops the instrument.
    t.keys(&["n"]);
    t.wait_for("the trend", |s| s.contains("Trend: would more threads"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while tracing_fds(kd) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(tracing_fds(kd), 0, "detached with its panel");
    t.keys(&["q"]);
    t.wait_for("kdiag to end", |s| s.contains("EXITED rc="));
    assert!(!pid_alive(kd as u64) && !pid_alive(pid as u64));
}

#[test]
fn closing_the_terminal_sigterm_or_sigkill_mid_trace_leaves_nothing() {
    if !require_root("closing_the_terminal_sigterm_or_sigkill_mid_trace_leaves_nothing") {
        return;
    }
    let _one = ONE_WORKLOAD.lock().unwrap_or_else(|e| e.into_inner());
    for how in ["hangup", "sigterm", "sigkill"] {
        let root = tempfile::tempdir().unwrap();
        let t = start(root.path(), "app-run-6");
        let pid = workload_pid(root.path());
        let scratch = scratch_of(pid as u64);
        let kd = kdiag_pid(&t);
        // Pick the workload, go to step 2: iosnoop is tracing.
        t.wait_for("the welcome", |s| s.contains("Press any key"));
        t.keys(&["Space", "s"]);
        let s = t.wait_up_to(Duration::from_secs(5), "the workload", |s| {
            row_of(s, pid).is_some()
        });
        t.keys(&["Home"]);
        for _ in 0..row_of(&s, pid).unwrap() {
            t.keys(&["Down"]);
        }
        t.keys(&["Enter", "n"]);
        t.wait_for("iosnoop", |s| s.contains(&format!("{pid} WS")));
        let loaded = bpf_programs::held_by(kd);
        assert!(!loaded.is_empty(), "iosnoop traces");
        match how {
            // The terminal's other side goes away: no shell is left to say
            // anything, kdiag must notice by itself.
            "hangup" => drop(t),
            // Nothing of kdiag runs after this: its supervisor sees it go
            // and ends the workload (SIGTERM, so its scratch folder goes).
            "sigkill" => {
                // SAFETY: signalling the kdiag this test started.
                unsafe { libc::kill(kd as i32, libc::SIGKILL) };
            }
            _ => {
                // SAFETY: signalling the kdiag this test started.
                unsafe { libc::kill(kd as i32, libc::SIGTERM) };
                let s = t.wait_for("kdiag to end", |s| s.contains("EXITED rc="));
                assert!(
                    !s.contains("Questions"),
                    "the alternate screen is gone: {s}"
                );
                assert!(s.contains("The workload has stopped"), "{s}");
            }
        }
        nothing_left(kd, pid, &scratch, &loaded);
    }
}
