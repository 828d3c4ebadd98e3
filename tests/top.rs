//! `kdiag top`: the plain frame for pipes, and the live screen driven
//! through tmux like a user would.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Kids, Tmux, free_pid, kdiag, run_kdiag, stderr, stdout};

fn spawn(cmd: &str, args: &[&str]) -> Child {
    Command::new(cmd)
        .args(args)
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn")
}

#[test]
fn once_prints_header_and_the_chosen_processes() {
    let kids = Kids(vec![
        spawn("sh", &["-c", "while :; do :; done"]),
        spawn("sleep", &["300"]),
    ]);
    let (busy, sleeper) = (kids.0[0].id(), kids.0[1].id());
    let list = format!("{busy},{sleeper}");
    let out = run_kdiag(&["top", "--once", "--interval", "1", "-p", &list]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("kdiag top - up ") && lines[0].contains("load average: "),
        "{text}"
    );
    assert!(lines[1].starts_with("Tasks: 2 total,"), "{text}");
    for part in [
        " us,", " sy,", " ni,", " id,", " wa,", " hi,", " si,", " st",
    ] {
        assert!(lines[2].contains(part), "{part} in {text}");
    }
    assert!(
        lines[3].starts_with("MiB Mem :") && lines[4].starts_with("MiB Swap:"),
        "{text}"
    );
    assert!(
        // Columns widen with their values ("100.0"), so compare words.
        lines[6]
            .split_whitespace()
            .take(4)
            .eq(["PID", "USER", "%CPU", "%MEM"])
            && lines[6].contains("COMMAND"),
        "{text}"
    );
    assert_eq!(
        lines.len(),
        9,
        "header, blank, table header, two rows: {text}"
    );

    // The same frame as JSON carries the numbers.
    let out = run_kdiag(&["top", "--json", "--interval", "1", "-p", &list]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let procs = v["processes"].as_array().unwrap();
    let find = |pid: u32| procs.iter().find(|p| p["pid"] == pid).expect("row").clone();
    let (b, s) = (find(busy), find(sleeper));
    assert_eq!(b["state"], "R");
    assert!(
        b["cpu_percent"].as_f64().unwrap() > 1.0,
        "busy loop uses CPU: {b}"
    );
    assert_eq!(s["state"], "S");
    assert_eq!(s["cpu_percent"], 0.0);
    // We are root: /proc/PID/io is readable, so rates are numbers, not "-".
    assert!(
        s["read_rate"].is_number() && s["write_rate"].is_number(),
        "{s}"
    );
    assert!(v["system"]["memory"]["total_kib"].as_u64().unwrap() > 0);
}

#[test]
fn missing_pid_fails_clearly() {
    let gone = free_pid();
    let out = run_kdiag(&["top", "--once", "-p", &gone]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(&format!("no process with PID {gone}")),
        "{}",
        stderr(&out)
    );
    let out = run_kdiag(&["top", "--once", "--interval", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn piped_output_is_one_frame_not_a_tui() {
    let out = kdiag().args(["top", "--interval", "0.2"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("kdiag top - up "), "{text}");
    assert!(!text.contains('\x1b'), "no escape sequences when piped");
}

/// After kdiag exits the shell reports its code and the terminal's modes,
/// which must be cooked again (icanon, echo).
fn session(args: &str) -> Tmux {
    let bin = env!("CARGO_BIN_EXE_kdiag");
    Tmux::start(&format!(
        "{bin} top {args}; echo EXITED rc=$?; stty -a | tr ' ;' '\\n\\n' | grep -x -- '-\\?icanon\\|-\\?echo'; sleep 60"
    ))
}

/// The shell has printed the exit code and both terminal modes.
fn exited(s: &str) -> bool {
    let has = |m: &str| s.lines().any(|l| l == m || l == format!("-{m}"));
    s.contains("EXITED rc=") && has("icanon") && has("echo")
}

#[test]
fn live_screen_keys_and_clean_exit() {
    let _kid = Kids(vec![spawn("sleep", &["300"])]);
    let t = session("--interval 0.5");
    // A capture can catch a frame half written: wait for its last line too.
    let s = t.wait_for("the whole first frame", |s| {
        s.contains("load average:") && s.contains("%CPU▼") && s.contains("sort: ")
    });
    assert!(
        s.contains("Tasks: ") && s.contains("MiB Mem :") && s.contains("MiB Swap:"),
        "{s}"
    );
    assert!(
        s.contains("sort: p=PID u=USER c=%CPU"),
        "sort keys shown: {s}"
    );

    // Sort by PID ascending, filter to sleep, open the detail panel.
    t.keys(&["p"]);
    t.wait_for("PID sort", |s| s.contains("PID▲"));
    t.keys(&["/", "s", "l", "e", "e", "p", "Enter"]);
    t.wait_for("the filter", |s| s.contains("[filter: sleep]"));
    t.keys(&["Down", "Enter"]);
    let s = t.wait_for("the detail panel", |s| s.contains("details (Esc closes)"));
    assert!(
        s.contains("thread(s)") && s.contains("open fds: ") && s.contains("cgroup: "),
        "{s}"
    );
    assert!(s.contains("run-queue wait: "), "{s}");

    t.keys(&["q"]);
    let s = t.wait_for("exit", exited);
    assert!(!s.contains("load average:"), "alternate screen left: {s}");
    assert!(
        s.lines().any(|l| l == "icanon") && s.lines().any(|l| l == "echo"),
        "terminal restored: {s}"
    );
}

#[test]
fn ctrl_c_quits_and_restores_the_terminal() {
    let t = session("--interval 1");
    t.wait_for("the header", |s| s.contains("load average:"));
    t.keys(&["C-c"]);
    let s = t.wait_for("exit", exited);
    assert!(s.contains("EXITED rc=0"), "{s}");
    assert!(s.lines().any(|l| l == "icanon"), "terminal restored: {s}");
}

#[test]
fn sigterm_quits_and_restores_the_terminal() {
    let t = session("--interval 1");
    t.wait_for("the header", |s| s.contains("load average:"));
    // The pane runs sh, whose child is kdiag.
    let sh = t.pane_pid();
    let children = std::fs::read_to_string(format!("/proc/{sh}/task/{sh}/children")).unwrap();
    let kdiag: i32 = children
        .split_whitespace()
        .next()
        .expect("kdiag runs")
        .parse()
        .unwrap();
    // SAFETY: signalling a process this test started.
    unsafe { libc::kill(kdiag, libc::SIGTERM) };
    let s = t.wait_for("exit", exited);
    assert!(s.contains("EXITED rc=0"), "{s}");
    assert!(
        s.lines().any(|l| l == "icanon") && s.lines().any(|l| l == "echo"),
        "{s}"
    );
}

/// Closing the window (here: killing its tmux session) must end kdiag top,
/// not leave it spinning on a terminal that only returns end-of-file.
#[test]
fn closing_the_terminal_ends_top() {
    let bin = env!("CARGO_BIN_EXE_kdiag");
    // kdiag is the pane's own process: nothing else gets the hangup for it.
    let t = Tmux::start(&format!("exec {bin} top --interval 0.5"));
    t.wait_for("the header", |s| s.contains("load average:"));
    let kdiag = t.pane_pid();
    drop(t); // kill-session: the terminal's other side goes away
    let start = Instant::now();
    while std::path::Path::new(&format!("/proc/{kdiag}")).exists() {
        let state = std::fs::read_to_string(format!("/proc/{kdiag}/stat")).unwrap_or_default();
        if state.contains(") Z ") {
            break; // exited; its parent (tmux) is gone and init reaps it
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "kdiag top still running 5 s after its terminal closed: {state}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
