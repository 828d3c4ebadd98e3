//! `kdiag ps` against procps on processes in known states.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Kids, Tmux, free_pid, run_kdiag, stderr, stdout};

/// Children killed and reaped when the test ends, even when it fails.
fn spawn(cmd: &str, args: &[&str]) -> Child {
    Command::new(cmd)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {cmd}: {e}"))
}

fn state(pid: u32) -> char {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    s.rsplit_once(") ")
        .and_then(|(_, r)| r.chars().next())
        .unwrap_or('?')
}

fn wait_state(pid: u32, want: char) {
    let t = Instant::now();
    while state(pid) != want {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "pid {pid} never reached {want}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// (stat, rss, args) per pid from `ps -o pid=,stat=,rss=,args=`.
fn procps(pids: &str) -> HashMap<i32, (String, u64, String)> {
    let out = Command::new("ps")
        .args(["-o", "pid=,stat=,rss=,args=", "-p", pids])
        .output()
        .expect("ps runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let mut w = l.split_whitespace();
            let pid = w.next().unwrap().parse().unwrap();
            let stat = w.next().unwrap().to_owned();
            let rss = w.next().unwrap().parse().unwrap();
            (pid, (stat, rss, w.collect::<Vec<_>>().join(" ")))
        })
        .collect()
}

fn kdiag_json(args: &[&str]) -> Vec<serde_json::Value> {
    let out = run_kdiag(args);
    assert!(out.status.success(), "kdiag {args:?}: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("kdiag ps --json is JSON")
}

#[test]
fn agrees_with_procps_on_known_states() {
    let mut kids = Kids(Vec::new());
    kids.0.push(spawn("sleep", &["300"]));
    kids.0.push(spawn("sleep", &["301"]));
    kids.0.push(spawn("sh", &["-c", "while :; do :; done"]));
    // The shell forks a child, prints its pid and becomes `sleep 302`,
    // which never reaps it: a zombie. The child waits for that exec before
    // it becomes `sleep 0` and exits: a child that ended first would be
    // reaped by the shell itself (dash does), as happened under load.
    kids.0.push(spawn(
        "sh",
        &[
            "-c",
            "(while read c < /proc/$$/comm; [ \"$c\" != sleep ]; do :; done; exec sleep 0) & \
             echo $!; exec sleep 302",
        ],
    ));
    // A session leader at low priority: `Ss` modifiers plus `N`.
    kids.0
        .push(spawn("setsid", &["nice", "-n", "5", "sleep", "303"]));
    let mut line = String::new();
    BufReader::new(kids.0[3].stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let zombie: u32 = line.trim().parse().expect("zombie pid");

    let (sleeping, stopped, busy, leader) = (
        kids.0[0].id(),
        kids.0[1].id(),
        kids.0[2].id(),
        kids.0[4].id(),
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(stopped as i32, libc::SIGSTOP) };
    wait_state(stopped, 'T');
    wait_state(busy, 'R');
    wait_state(zombie, 'Z');
    wait_state(leader, 'S');
    // `nice` must have exec'd `sleep` before we compare arguments.
    let t = Instant::now();
    while !std::fs::read_to_string(format!("/proc/{leader}/cmdline"))
        .unwrap()
        .starts_with("sleep")
    {
        assert!(t.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(20));
    }

    let list = [sleeping, stopped, busy, zombie, leader]
        .map(|p| p.to_string())
        .join(",");
    let ours = kdiag_json(&["ps", "-p", &list, "--json"]);
    let theirs = procps(&list);
    assert_eq!(ours.len(), 5, "one row per pid: {ours:?}");
    for row in &ours {
        let pid = row["pid"].as_i64().unwrap() as i32;
        let (stat, rss, args) = &theirs[&pid];
        assert_eq!(row["stat"], stat.as_str(), "STAT of {pid}");
        assert_eq!(row["command"], args.as_str(), "COMMAND of {pid}");
        let ours_rss = row["rss_kib"].as_u64().unwrap();
        let tolerance = if pid as u32 == busy { 256 } else { 0 };
        assert!(
            ours_rss.abs_diff(*rss) <= tolerance,
            "RSS of {pid}: kdiag {ours_rss}, ps {rss}"
        );
    }
    // This test process is multi-threaded (the harness runs tests on
    // threads): the `l` modifier. Its RSS moves with the other tests.
    let me = std::process::id();
    let mine = kdiag_json(&["ps", "-p", &me.to_string(), "--json"]);
    let theirs = procps(&me.to_string());
    // Only the modifiers: the main thread's own letter flips between S and
    // R as the harness wakes it between the two reads.
    let (ours_stat, their_stat) = (mine[0]["stat"].as_str().unwrap(), &theirs[&(me as i32)].0);
    assert_eq!(ours_stat[1..], their_stat[1..], "STAT of the test process");
    assert!(mine[0]["stat"].as_str().unwrap().contains('l'));
    assert_eq!(mine[0]["command"], theirs[&(me as i32)].2.as_str());

    let by_pid = |p: u32| ours.iter().find(|r| r["pid"] == p).unwrap().clone();
    assert!(by_pid(stopped)["stat"].as_str().unwrap().starts_with('T'));
    assert!(by_pid(busy)["stat"].as_str().unwrap().starts_with('R'));
    assert_eq!(by_pid(zombie)["command"], "[sleep] <defunct>");
    assert_eq!(by_pid(leader)["stat"], "SNs");

    // The text table has ps aux's header and the zombie under its parent.
    let parent = kids.0[3].id();
    let text = run_kdiag(&["ps", "-p", &format!("{list},{parent}"), "--forest"]);
    let text = stdout(&text);
    assert!(text.starts_with("USER "), "{text}");
    assert!(text.contains("%CPU %MEM"), "{text}");
    assert!(text.contains(" \\_ [sleep] <defunct>"), "{text}");
    // SAFETY: as above.
    unsafe { libc::kill(stopped as i32, libc::SIGCONT) };
}

#[test]
fn missing_pid_is_a_clear_failure() {
    let gone = free_pid();
    let out = run_kdiag(&["ps", "-p", &gone]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!("no process with PID {gone}")),
        "{}",
        stderr(&out)
    );
    // One live pid among missing ones: show it, succeed.
    let me = std::process::id().to_string();
    let out = run_kdiag(&["ps", "-p", &format!("{gone},{me}")]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).lines().nth(1).unwrap().contains(&me));
}

#[test]
fn bad_arguments_are_usage_errors() {
    let out = run_kdiag(&["ps", "--sort", "colour"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown sort field"),
        "{}",
        stderr(&out)
    );
    let out = run_kdiag(&["ps", "-u", "no-such-user-kdiag"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn filters_sort_and_threads() {
    let kids = Kids(vec![spawn("sleep", &["310"]), spawn("sleep", &["311"])]);
    let rows = kdiag_json(&[
        "ps", "--comm", "sleep", "-u", "root", "--sort", "-pid", "--json",
    ]);
    assert!(
        rows.iter()
            .all(|r| r["comm"] == "sleep" && r["user"] == "root")
    );
    let pids: Vec<i64> = rows.iter().map(|r| r["pid"].as_i64().unwrap()).collect();
    for k in &kids.0 {
        assert!(pids.contains(&(k.id() as i64)), "{pids:?} lacks {}", k.id());
    }
    assert!(pids.windows(2).all(|w| w[0] > w[1]), "descending: {pids:?}");

    // -T: one row per thread of this (multi-threaded) test process.
    let me = std::process::id();
    let tasks = std::fs::read_dir(format!("/proc/{me}/task"))
        .unwrap()
        .count();
    let _pause = std::thread::spawn(|| std::thread::sleep(Duration::from_millis(500)));
    let rows = kdiag_json(&["ps", "-T", "-p", &me.to_string(), "--json"]);
    assert!(
        rows.len() >= tasks.min(2),
        "{} rows for {tasks} tasks",
        rows.len()
    );
    assert!(rows.iter().all(|r| r["pid"] == me));
    assert!(rows.iter().any(|r| r["tid"] != me));
    let text = stdout(&run_kdiag(&["ps", "-T", "-p", &me.to_string()]));
    assert!(text.starts_with("USER") && text.contains(" LWP "), "{text}");
}

/// On a terminal (a tmux pane): TTY names and the `s` and `+` modifiers of a
/// shell that leads its session and owns the foreground.
#[test]
fn terminal_columns_agree_with_procps() {
    let dir = tempfile::tempdir().unwrap();
    let (ours, theirs) = (dir.path().join("kdiag"), dir.path().join("ps"));
    let script = format!(
        "{bin} ps -p $$ --json > {o}.tmp && mv {o}.tmp {o}; ps -o tty=,stat= -p $$ > {t}.tmp && mv {t}.tmp {t}; sleep 30",
        bin = env!("CARGO_BIN_EXE_kdiag"),
        o = ours.display(),
        t = theirs.display(),
    );
    let session = Tmux::start(&script);
    let t = Instant::now();
    while !(ours.exists() && theirs.exists()) && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(session);
    let row: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&ours).expect("kdiag wrote")).unwrap();
    let ps = std::fs::read_to_string(&theirs).expect("ps wrote");
    let mut w = ps.split_whitespace();
    let (tty, stat) = (w.next().unwrap(), w.next().unwrap());
    assert!(tty.starts_with("pts/"), "{ps}");
    assert_eq!(row[0]["tty"], tty);
    // Only the modifiers: the shell's own state letter may flip between S
    // and R while it waits for and wakes from its children.
    let ours = row[0]["stat"].as_str().unwrap();
    assert_eq!(ours[1..], stat[1..], "kdiag {ours}, ps {stat}");
    assert!(stat.ends_with("s+"), "{stat}");
}

/// 4-bio's process under its limit: procps's STAT is its main thread's
/// (asleep), but most of its readers wait in D, and ps's S column says so
/// with their count, as top does.
#[test]
fn a_process_whose_threads_wait_in_d_shows_d_with_their_count() {
    if !common::require_root("a_process_whose_threads_wait_in_d_shows_d_with_their_count") {
        return;
    }
    let bio = common::throttled_bio::ThrottledBio::start();
    let pid = bio.pid.to_string();
    let (before, threads) = bio.states();
    let row = kdiag_json(&["ps", "-p", &pid, "--json"]).remove(0);
    let text = stdout(&run_kdiag(&["ps", "-p", &pid]));
    let (after, _) = bio.states();
    assert_eq!(row["state"], "D", "{row}");
    assert_eq!(row["threads"], threads, "{row}");
    assert!(row["stat"].as_str().unwrap().starts_with('S'), "{row}");
    // Readers flip between D and a moment on the CPU: /proc's counts just
    // before and after bound it loosely.
    let in_d = row["threads_in_state"].as_u64().unwrap() as usize;
    let (lo, hi) = (before.min(after), before.max(after));
    assert!(
        in_d + 3 >= lo && in_d <= hi + 3 && in_d * 2 > threads,
        "{in_d} in D; /proc: {before} then {after} of {threads}"
    );
    let line = text.lines().nth(1).unwrap();
    let cell = line.split_whitespace().nth(8).unwrap_or_default();
    let count = line.split_whitespace().nth(9).unwrap_or_default();
    assert_eq!(cell, "D", "{text}");
    assert!(count.ends_with(&format!("/{threads}")), "{text}");
}
