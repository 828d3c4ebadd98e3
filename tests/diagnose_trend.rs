//! `kdiag diagnose`'s trend on real workloads, each against the workload's
//! own truth (`kdiag workload describe NAME --seed S`): mem-leak's RSS
//! grows at its rate, io-stall's writes come at its period, a steady
//! cpu-burn is steady and one that starts late is a one-off change. Then
//! the live view: drawn from a made-up window with ratatui's TestBackend
//! (compared with tests/data/diagnose_trend/, KDIAG_BLESS=1 rewrites it),
//! and for real in tmux, where q ends it early with the report and
//! nothing left behind. The tests that load the CPUs run one at a time.

mod common;

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use common::lab_run::pid_alive;
use common::own_cpu::OwnCpu;
use common::{Tmux, kdiag, run_kdiag, stderr, stdout, workload};
use kdiag::model::trend::{Series, Trend};
use kdiag::tui::diagnose::{self, State};
use kdiag::tui::keys::Key;
use serde_json::Value;

fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// `kdiag diagnose --json --why none ARGS -- CMD`: the whole document.
fn diagnose(args: &[&str], cmd: &[&str]) -> Value {
    let mut all = vec!["--why", "none"];
    all.extend_from_slice(args);
    all.push("--");
    all.extend_from_slice(cmd);
    common::diagnose_json(&all)
}

/// The shape of series `name`.
fn shape<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["diagnosis"]["trend"]["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no series {name}: {:#}", v["diagnosis"]["trend"]))
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

fn bin(name: &str) -> String {
    workload(name).to_string_lossy().into_owned()
}

#[test]
fn a_leak_grows_at_the_workloads_rate() {
    let _g = one_at_a_time();
    let seed = "7";
    let t = common::workload_truth("mem-leak", seed);
    let rate = t["rate_bytes_per_s"].as_f64().unwrap();
    // Watched well before it reaches its cap.
    let secs = 8.0f64.min(t["cap_after_s"].as_f64().unwrap() - 2.0);
    let v = diagnose(
        &["-d", &secs.to_string()],
        &[&bin("mem-leak"), "--seed", seed],
    );
    let rss = shape(&v, "RSS anonymous");
    assert_eq!(rss["class"], "growing", "{rss:#}");
    let slope = rss["slope"].as_f64().unwrap();
    assert!(
        (slope - rate).abs() <= 0.15 * rate,
        "slope {slope:.0} B/s, the workload's rate {rate} B/s"
    );
    // And the time to a limit, saying which.
    assert!(rss["reaches_limit_s"].as_f64().unwrap() > 0.0, "{rss:#}");
    let limit = &v["diagnosis"]["trend"]["memory_limit"]["what"];
    assert!(limit.as_str().is_some_and(|w| !w.is_empty()), "{limit}");
    // The points themselves are in the observation, one per interval.
    let series = &v["observation"]["trend"]["series"];
    let points = series.as_array().unwrap()[0]["points"].as_array().unwrap();
    assert!(points.len() >= 8, "{} points", points.len());
}

#[test]
fn io_stall_is_periodic_at_its_period() {
    let _g = one_at_a_time();
    let seed = "7";
    let period = common::workload_truth("io-stall", seed)["period_s"]
        .as_f64()
        .unwrap();
    // Six periods at least, a point every tenth of a period or less.
    let secs = (6.0 * period).max(12.0);
    let interval = (period / 10.0).max(0.1);
    let v = diagnose(
        &["-d", &secs.to_string(), "--interval", &interval.to_string()],
        &[&bin("io-stall"), "--seed", seed],
    );
    // The culprit's write bytes are charged when it dirties the pages:
    // its clearest sign (its own storage waits are short on a fast disk).
    let w = shape(&v, "storage written");
    assert_eq!(w["class"], "periodic", "{w:#}");
    let got = w["period_s"].as_f64().unwrap();
    assert!(
        (got - period).abs() <= 0.1 * period,
        "period {got:.2} s, the workload's {period} s"
    );
    let duty = w["duty"].as_f64().unwrap();
    assert!(duty > 0.0 && duty < 0.5, "bursts, not a level: duty {duty}");
}

#[test]
fn a_steady_burn_is_steady_and_a_late_start_is_a_change() {
    let _g = one_at_a_time();
    // In a cgroup of its own with the largest weight: beside other load
    // cpu-burn got 0.14 of a CPU, and its start no longer showed.
    let own = OwnCpu::new("trend");
    let enter = OwnCpu::enter(own.as_ref());
    let steady = format!("{enter}exec {} --seed 7", bin("cpu-burn"));
    let v = diagnose(&["-d", "8"], &["sh", "-c", &steady]);
    let cpu = shape(&v, "CPU");
    if cpu["class"] != "steady" {
        // Only another load on the machine moves it: then its wait for a
        // CPU moved with it.
        let queue = shape(&v, "waiting for a CPU");
        assert_ne!(queue["class"], "steady", "CPU {cpu:#}, queue {queue:#}");
        eprintln!("cpu-burn's CPU moved with its wait for a CPU: {cpu}");
    }
    // Asleep for 3 s, then burning: one change, at about 3 s.
    let script = format!("{enter}sleep 3; exec {} --seed 7", bin("cpu-burn"));
    let v = diagnose(&["-d", "8", "--interval", "0.5"], &["sh", "-c", &script]);
    let cpu = shape(&v, "CPU");
    assert_eq!(cpu["class"], "change", "{cpu:#}");
    let at = cpu["at_s"].as_f64().unwrap();
    assert!((1.5..=4.5).contains(&at), "changed at {at} s");
    // Up by a good part of a CPU (less than a whole one on a busy machine).
    let (before, after) = (num(&cpu["before"]), num(&cpu["after"]));
    assert!(before < 0.2 && after > before + 0.2, "{cpu:#}");
    let text = run_text(&["-d", "6", "--interval", "0.5"], &["sh", "-c", &script]);
    assert!(text.contains("\nTrend (a point every 0.5 s):\n"), "{text}");
    // The steady series in one list (the change itself is judged above:
    // a shorter window on a busy machine may blur it).
    assert!(text.contains("\n  Steady: "), "{text}");
}

fn run_text(args: &[&str], cmd: &[&str]) -> String {
    let out = kdiag()
        .args(["diagnose", "--why", "none"])
        .args(args)
        .arg("--")
        .args(cmd)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

#[test]
fn intervals_that_leave_too_few_points_and_live_off_a_terminal_are_refused() {
    let out = run_kdiag(&["diagnose", "-d", "2", "--interval", "1", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("fewer than 5 points"),
        "{}",
        stderr(&out)
    );
    let out = run_kdiag(&["diagnose", "--live", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--live draws on a terminal"),
        "{}",
        stderr(&out)
    );
}

/// A made-up window: a leak, bursts of writes, a steady CPU, a level that
/// never moves off zero (not drawn).
fn window() -> State {
    let series = |name: &str, unit: &str, f: &dyn Fn(f64) -> f64| Series {
        name: name.into(),
        unit: unit.into(),
        points: (1..=40)
            .map(|i| {
                let t = i as f64 * 0.5;
                (t, f(t))
            })
            .collect(),
    };
    State {
        target: "PID 4242 and its descendants".into(),
        window_s: 30.0,
        elapsed_s: 20.0,
        trend: Trend {
            interval_s: 0.5,
            series: vec![
                series("RSS anonymous", "B", &|t| 1e8 + 2e6 * t),
                series("storage written", "B/s", &|t| {
                    if (t * 2.0) as i64 % 5 == 0 { 3e8 } else { 0.0 }
                }),
                series("CPU", "CPUs", &|_| 0.5),
                series("major faults", "/s", &|_| 0.0),
            ],
            ..Default::default()
        },
        ..Default::default()
    }
}

fn screen(name: &str, s: &State, w: u16, h: u16) -> String {
    common::screens::snapshot("diagnose_trend", name, w, h, |f| diagnose::render(f, s))
}

#[test]
fn the_live_view_draws_each_moving_series() {
    let s = window();
    let text = screen("live", &s, 100, 16);
    assert!(
        text.contains("PID 4242 and its descendants: 20 of 30 s"),
        "{text}"
    );
    assert!(text.contains("q: stop and report"), "{text}");
    for title in [
        "RSS anonymous 133.5 MiB",
        "storage written 286.1 MiB/s",
        "CPU 0.50 CPUs",
    ] {
        assert!(text.contains(title), "{title}:\n{text}");
    }
    assert!(
        !text.contains("major faults"),
        "a series at zero is not drawn"
    );
    assert!(text.contains('█'), "bars drawn:\n{text}");
    // Narrow: one column of charts.
    let text = screen("live-narrow", &s, 60, 16);
    assert!(text.contains("CPU 0.50 CPUs"), "{text}");
    // Before the first point.
    let empty = State {
        trend: Trend {
            interval_s: 1.0,
            ..Default::default()
        },
        ..s.clone()
    };
    let text = screen("live-waiting", &empty, 100, 5);
    assert!(text.contains("Waiting for the first point"), "{text}");
}

#[test]
fn keys_stop_the_live_view() {
    let mut s = window();
    diagnose::update(&mut s, Key::Char('x'));
    assert!(!s.quit);
    diagnose::update(&mut s, Key::Char('q'));
    assert!(s.quit && !s.interrupted);
    let mut s = window();
    diagnose::update(&mut s, Key::CtrlC);
    assert!(s.quit && s.interrupted, "Ctrl-C counts as SIGINT");
}

#[test]
fn live_in_a_terminal_draws_then_q_reports_and_leaves_nothing() {
    let _g = one_at_a_time();
    let t = Tmux::start_sized(
        &format!(
            "{} diagnose -d 60 --live --why none -- {} --seed 7; echo EXITED rc=$?; sleep 600",
            env!("CARGO_BIN_EXE_kdiag"),
            bin("cpu-burn")
        ),
        160,
        60,
    );
    // Six points at least before q, so the report has a trend.
    let elapsed = |s: &str| -> u32 {
        s.split(": ")
            .nth(1)
            .and_then(|r| r.split(" of ").next()?.parse().ok())
            .unwrap_or(0)
    };
    let screen = t.wait_up_to(Duration::from_secs(30), "the CPU chart, 6 s in", |s| {
        s.contains("q: stop and report") && s.contains("┌ CPU ") && elapsed(s) >= 6
    });
    assert!(screen.contains('█'), "bars drawn:\n{screen}");
    let pid: u32 = screen
        .split("PID ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no PID in:\n{screen}"));
    assert!(pid_alive(pid as u64), "cpu-burn runs while watched");
    t.keys(&["q"]);
    let screen = t.wait_for("the report after q", |s| s.contains("EXITED rc="));
    assert!(screen.contains("EXITED rc=0"), "{screen}");
    assert!(screen.contains("Trend (a point every"), "{screen}");
    assert!(
        !screen.contains("q: stop and report"),
        "the view is gone:\n{screen}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while pid_alive(pid as u64) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!pid_alive(pid as u64), "cpu-burn outlived kdiag");
}

/// kdiag's PID: the pane's shell's child.
fn kdiag_in(t: &Tmux) -> u32 {
    let sh = t.pane_pid();
    std::fs::read_to_string(format!("/proc/{sh}/task/{sh}/children"))
        .unwrap()
        .split_whitespace()
        .next()
        .expect("kdiag runs")
        .parse()
        .unwrap()
}

#[test]
fn closing_the_terminal_ends_the_live_view_and_its_command() {
    let _g = one_at_a_time();
    let t = Tmux::start(&format!(
        "{} diagnose -d 60 --live --why none -- {} --seed 7; sleep 600",
        env!("CARGO_BIN_EXE_kdiag"),
        bin("cpu-burn")
    ));
    let screen = t.wait_for("the view", |s| s.contains("q: stop and report"));
    let pid: u32 = screen
        .split("PID ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no PID in:\n{screen}"));
    let kdiag = kdiag_in(&t);
    // A key first: a view that could not read the terminal spun on it.
    t.keys(&["x"]);
    drop(t);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while (pid_alive(kdiag as u64) || pid_alive(pid as u64)) && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!pid_alive(kdiag as u64), "kdiag outlived its terminal");
    assert!(!pid_alive(pid as u64), "cpu-burn outlived kdiag");
}
