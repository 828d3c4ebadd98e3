//! The lab app's screens for lab 0-demo, drawn from recorded data with
//! ratatui's TestBackend: no terminal, no privileges. Each screen is
//! compared with its text in tests/data/lab_screens/ (KDIAG_BLESS=1
//! rewrites them after a deliberate change), and the test says what it
//! must show besides.
//!
//! Recorded data: io-app's block requests and folded stacks captured from a
//! real run (io-app.iosnoop.json, io-app.profile.folded, PID 13812);
//! process rows with the rates top showed in that run.

#[path = "common/screens.rs"]
mod screens;

use std::collections::HashMap;
use std::path::PathBuf;

use kdiag::analysis::fold::frame_of;
use kdiag::analysis::top::{CpuSplit, TaskCounts, TopRow};
use kdiag::commands::lab::lab_view;
use kdiag::lab::medium::{Launch, Medium};
use kdiag::lab::{self, LabSource};
use kdiag::model::block::BlockIo;
use kdiag::model::exec::{ExecEvent, Exit, ProcessEnd, TraceEvent};
use kdiag::model::profile::{OffState, Profile, Stack};
use kdiag::tui::lab::app::{Driver, perform};
use kdiag::tui::lab::event::{Data, Given, Key, Msg, Verdict};
use kdiag::tui::lab::panels::process::FocusSample;
use kdiag::tui::lab::panels::processes::ProcSample;
use kdiag::tui::lab::state::{Overlay, State};
use kdiag::tui::lab::view;
use kdiag::tui::top::Data as TopData;

const PID: i32 = 13812;
const ANSWERS: &str = "/home/you/.local/state/kdiag/labs/0-demo/answers.toml";

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/lab_screens")
        .join(name)
}

/// The reference answers of the recorded run, and a driver that checks
/// against them with the lab's own messages: the grader is tested
/// elsewhere, the screens here.
struct Recorded {
    right: HashMap<&'static str, &'static str>,
    fail: HashMap<String, String>,
    saved: Vec<(String, String)>,
}

impl Recorded {
    fn new() -> Recorded {
        let (_, checks) = lab::load(&LabSource::default(), "0-demo").unwrap();
        Recorded {
            right: HashMap::from([
                ("who.pid", "13812"),
                ("who.comm", "io-app"),
                ("what.io_type", "WS"),
                ("what.sync", "yes"),
                ("why.syscall", "write"),
                ("why.function", "io_app::write_pass"),
                ("why.file", "/var/tmp/kdiag-io-app/data-1b2c.bin"),
                (
                    "artifacts.profile",
                    "/home/you/.local/state/kdiag/labs/0-demo/profile.folded",
                ),
                ("trend.pattern", "repeated-range"),
                ("trend.region_bytes", "10 MiB"),
            ]),
            fail: checks
                .checks
                .iter()
                .map(|c| (c.id.clone(), c.fail.clone()))
                .collect(),
            saved: Vec::new(),
        }
    }
}

impl Driver for Recorded {
    fn answer(
        &mut self,
        _: usize,
        given: &[(String, String)],
    ) -> anyhow::Result<Vec<(String, Verdict)>> {
        Ok(given
            .iter()
            .map(|(k, v)| {
                let ok = self.right.get(k.as_str()) == Some(&v.as_str());
                let verdict = if ok {
                    Verdict::Right
                } else {
                    Verdict::NotYet(self.fail[k].clone())
                };
                (k.clone(), verdict)
            })
            .collect())
    }
    fn save(&mut self, file: &str, contents: &str) -> anyhow::Result<String> {
        self.saved.push((file.to_string(), contents.to_string()));
        Ok(format!("/home/you/.local/state/kdiag/labs/0-demo/{file}"))
    }
    fn reload(&mut self) -> anyhow::Result<Vec<Given>> {
        Ok(Vec::new())
    }
    fn changed(&mut self) -> anyhow::Result<Option<Vec<Given>>> {
        Ok(None)
    }
    fn workload_stopped(&mut self) -> Option<String> {
        None
    }
}

fn demo() -> State {
    let (lab, checks) = lab::load(&LabSource::default(), "0-demo").unwrap();
    let shell = |_: usize| Vec::new();
    State::new(
        lab_view(
            &lab,
            &checks,
            &shell,
            ANSWERS,
            Launch::default(),
            Medium::App,
        ),
        &[],
    )
}

fn row(pid: i32, comm: &str, state: char, cpu: f64, write: f64, command: &str) -> TopRow {
    TopRow {
        pid,
        user: "you".into(),
        cpu_percent: cpu,
        mem_percent: 0.1,
        res_kib: 2048,
        state,
        in_state: 0,
        threads: 1,
        read_rate: Some(0.0),
        write_rate: Some(write),
        vcsw_rate: if comm == "io-app" { 305.0 } else { 2.0 },
        ivcsw_rate: 1.0,
        comm: comm.into(),
        command: command.into(),
    }
}

fn procs(secs: f64, write: f64) -> Data {
    let rows = vec![
        row(1, "systemd", 'S', 0.0, 0.0, "/sbin/init"),
        row(812, "bash", 'S', 0.0, 4096.0, "bash"),
        row(
            PID,
            "io-app",
            'D',
            12.6,
            write,
            "/home/you/kdiag/target/release/io-app --seed 7 --duration 0",
        ),
        row(
            13810,
            "kdiag",
            'S',
            2.9,
            11980.0,
            "/home/you/kdiag/target/release/kdiag lab 0-demo",
        ),
        row(
            97,
            "kworker/1:1H-kblockd",
            'I',
            2.1,
            0.0,
            "[kworker/1:1H-kblockd]",
        ),
        row(
            2211,
            "cc1",
            'R',
            48.3,
            0.0,
            "/usr/lib/gcc/x86_64-linux-gnu/13/cc1 -quiet main.c",
        ),
    ];
    Data::Procs(Box::new(ProcSample {
        secs,
        data: TopData {
            cpu: CpuSplit {
                us: 10.0,
                sy: 10.0,
                id: 79.0,
                wa: 1.0,
                ..Default::default()
            },
            tasks: TaskCounts {
                total: 124,
                running: 2,
                sleeping: 121,
                disk: 1,
                threads_r: 2,
                threads_d: 1,
                ..Default::default()
            },
            rows,
            ..Default::default()
        },
    }))
}

fn focus(secs: f64) -> Data {
    Data::Focus(FocusSample {
        secs,
        pid: PID,
        comm: "io-app".into(),
        threads: 1,
        user_pct: 0.5 + (secs % 3.0) * 0.1,
        sys_pct: 12.0 + (secs % 2.0),
        read_bps: Some(0.0),
        write_bps: Some(158.0 * 1048576.0 + (secs % 4.0) * 1e6),
        minflt_s: 0.0,
        majflt_s: 0.0,
        vcsw_s: 305.0,
        ivcsw_s: 25.0,
        rss_kib: 12 * 1024,
        states: vec![('D', 0.84), ('R', 0.12), ('S', 0.04)],
        wchans: vec![
            ("folio_wait_bit_common".into(), 0.6),
            ("jbd2_log_wait_commit".into(), 0.2),
        ],
        gone: false,
    })
}

fn requests() -> Vec<BlockIo> {
    #[derive(serde::Deserialize)]
    struct Doc {
        requests: Vec<BlockIo>,
    }
    let text = std::fs::read_to_string(data("io-app.iosnoop.json")).unwrap();
    serde_json::from_str::<Doc>(&text).unwrap().requests
}

/// Folded stacks back into a profile (`_[k]` marks kernel frames).
fn profile() -> Profile {
    let text = std::fs::read_to_string(data("io-app.profile.folded")).unwrap();
    let mut p = Profile {
        freq_hz: 199,
        event: "cpu-clock".into(),
        ..Default::default()
    };
    for line in text.lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap();
        let n: u64 = n.parse().unwrap();
        let mut parts = stack.split(';');
        let comm = parts.next().unwrap().to_string();
        let frames = parts.map(frame_of).collect();
        p.samples += n;
        p.stacks.push(Stack {
            comm,
            frames,
            samples: n,
            weight: n * 5_025_125,
            user_depth: 10,
            state: None,
            waker: None,
            ongoing: false,
        });
    }
    p.cost.wall_secs = 2.0;
    p
}

fn exec_events() -> Vec<TraceEvent> {
    let exec = |t: u64, pid: u32, file: &str, ret: i64, errno: Option<&'static str>| {
        TraceEvent::Exec(ExecEvent {
            time_ns: t,
            pid,
            tid: pid,
            ppid: PID as u32,
            uid: 1000,
            comm: "bad-elf".into(),
            syscall: "execve",
            filename: Some(file.into()),
            argv: vec![file.into()],
            argv_truncated: false,
            ret,
            errno,
        })
    };
    vec![
        exec(1_000, 14001, "./ok", 0, None),
        exec(2_000, 14002, "./congruence", -8, Some("ENOEXEC")),
        TraceEvent::Exit(ProcessEnd {
            time_ns: 3_000,
            pid: 14002,
            comm: "bad-elf".into(),
            exit: Exit::Code { code: 1 },
        }),
    ]
}

/// Every panel's data, as the collectors would have sent it.
fn with_data(s: &mut State) {
    for i in 0..30 {
        let t = i as f64;
        s.update(Msg::Data(procs(
            t,
            150.0 * 1048576.0 + (i % 5) as f64 * 4e6,
        )));
        s.update(Msg::Data(focus(t)));
    }
    s.update(Msg::Data(Data::Io(requests())));
    s.update(Msg::Data(Data::Status(
        kdiag::model::lab::Panel::Iosnoop,
        "BPF tier, 0 events lost".into(),
    )));
}

fn press(s: &mut State, d: &mut Recorded, keys: &[Key]) {
    for &k in keys {
        let effects = s.update(Msg::Key(k));
        perform(s, d, effects);
    }
}

fn typed(text: &str) -> Vec<Key> {
    let mut keys = vec![Key::Enter];
    keys.extend(text.chars().map(Key::Char));
    keys.push(Key::Enter);
    keys
}

/// The screen's text at `w` x `h`, compared with its snapshot.
fn screen(name: &str, s: &State, w: u16, h: u16) -> String {
    screens::snapshot("lab_screens", name, w, h, |f| view::render(f, s))
}

#[test]
fn welcome_then_step_list_and_process_table() {
    let mut s = demo();
    assert_eq!(s.overlay, Overlay::Welcome);
    let t = screen("welcome", &s, 120, 40);
    assert!(
        t.contains("Lab 0-demo: Something is hammering the disk"),
        "{t}"
    );
    let mut d = Recorded::new();
    press(&mut s, &mut d, &[Key::Char(' ')]);
    with_data(&mut s);
    let t = screen("who-table", &s, 120, 40);
    for want in [
        "○ 1. Who is causing",
        "○ 4. Trend",
        "score 0/15",
        "who: processes",
        "io-app --seed 7",
    ] {
        assert!(t.contains(want), "{want}: {t}");
    }
    // Sorted by WRITE/s (s, once), io-app comes first.
    press(&mut s, &mut d, &[Key::Char('s')]);
    let t = screen("who-by-write", &s, 120, 40);
    let first = t
        .lines()
        .find(|l| l.contains("│13812") || l.contains("│   13812"));
    assert!(first.is_some(), "{t}");
}

#[test]
fn a_wrong_pick_then_the_right_one() {
    let mut s = demo();
    let mut d = Recorded::new();
    press(&mut s, &mut d, &[Key::Esc]);
    with_data(&mut s);
    // cc1 (most CPU) is highlighted first: a wrong pick.
    press(&mut s, &mut d, &[Key::Enter]);
    let t = screen("who-wrong", &s, 120, 40);
    assert!(t.contains("not yet: who.pid is not the process"), "{t}");
    assert!(
        !t.contains("13812 io") && !t.contains("Name of that process: io-app"),
        "no answer given away: {t}"
    );
    // The right one: sort by WRITE/s, first row, Enter.
    press(&mut s, &mut d, &[Key::Char('s'), Key::Home, Key::Enter]);
    assert!(s.step_done(0));
    let t = screen("who-right", &s, 120, 40);
    assert!(
        t.contains("── Done: what you found ──") && t.contains("iosnoop charges"),
        "{t}"
    );
    assert!(t.contains("✓ 1. Who") && t.contains("score 1/15"), "{t}");
}

#[test]
fn what_panels_a_wrong_answer_and_a_hint() {
    let mut s = demo();
    let mut d = Recorded::new();
    press(&mut s, &mut d, &[Key::Esc]);
    with_data(&mut s);
    press(
        &mut s,
        &mut d,
        &[Key::Char('s'), Key::Home, Key::Enter, Key::Char('n')],
    );
    let t = screen("what-iosnoop", &s, 120, 40);
    assert!(
        t.contains("what: block requests (iosnoop) · PID 13812 io-app"),
        "{t}"
    );
    assert!(t.contains("io-app             13812 WS"), "{t}");
    // A read for writes: wrong under the course's rule (W alone would be
    // right for WS: grade/policy.rs).
    press(&mut s, &mut d, &typed("R"));
    press(&mut s, &mut d, &[Key::Char('h')]);
    let t = screen("what-wrong-hint", &s, 120, 40);
    assert!(t.contains("✗ Type of its block requests"), "{t}");
    assert!(
        t.contains("not yet: what.io_type is not the operation of the requests"),
        "{t}"
    );
    assert!(t.contains("hint: The TYPE column"), "{t}");
    press(&mut s, &mut d, &[Key::Char('v')]);
    let t = screen("what-process", &s, 120, 40);
    for want in [
        "CPU system",
        "write",
        "disk wait (D) 84%",
        "waiting in: folio_wait_bit_common",
    ] {
        assert!(t.contains(want), "{want}: {t}");
    }
}

#[test]
fn why_profile_and_evidence() {
    let mut s = demo();
    let mut d = Recorded::new();
    press(&mut s, &mut d, &[Key::Esc]);
    with_data(&mut s);
    press(
        &mut s,
        &mut d,
        &[
            Key::Char('s'),
            Key::Home,
            Key::Enter,
            Key::Char('n'),
            Key::Char('n'),
        ],
    );
    s.update(Msg::Data(Data::Profile(Box::new(profile()))));
    let t = screen("why-profile", &s, 120, 40);
    assert!(t.contains("Top functions by self time"), "{t}");
    assert!(
        t.contains("io_app::write_pass"),
        "the call tree reaches the program's function: {t}"
    );
    // Evidence: Enter opens the path's box, Enter alone saves the panel's
    // stacks; nothing is saved before.
    press(&mut s, &mut d, &[Key::BackTab, Key::Enter]);
    assert!(d.saved.is_empty() && s.editing.is_some());
    press(&mut s, &mut d, &[Key::Enter]);
    assert_eq!(d.saved.len(), 1);
    assert_eq!(d.saved[0].0, "profile.folded");
    assert!(d.saved[0].1.contains("io-app;") && d.saved[0].1.contains("io_app::write_pass"));
    let t = screen("why-evidence", &s, 120, 40);
    assert!(t.contains("✓ Saved profile"), "{t}");
}

/// The profile panel's call tree, taller than the panel at 80x24, says
/// how much is below and, once scrolled, how much is above.
#[test]
fn profile_panel_at_80x24_marks_what_is_off_screen() {
    let mut s = demo();
    let mut d = Recorded::new();
    press(&mut s, &mut d, &[Key::Esc]);
    with_data(&mut s);
    let why = [
        Key::Char('s'),
        Key::Home,
        Key::Enter,
        Key::Char('n'),
        Key::Char('n'),
    ];
    press(&mut s, &mut d, &why);
    s.update(Msg::Data(Data::Profile(Box::new(profile()))));
    let t = screens::text(80, 24, |f| view::render(f, &s));
    assert!(t.contains("Top functions by self time"), "{t}");
    // The panel's markers (the step text above has its own, with PgUp PgDn).
    assert!(t.contains("more line(s) below (↓ scrolls)"), "{t}");
    assert!(!t.contains("more line(s) above (↑ Home)"), "{t}");
    press(&mut s, &mut d, &[Key::Down; 3]);
    let t = screen("why-profile-80x24-scrolled", &s, 80, 24);
    assert!(t.contains("↑ 3 more line(s) above (↑ Home)"), "{t}");
    // At the end of the tree no marker promises more below.
    press(&mut s, &mut d, &[Key::Down; 200]);
    let t = screens::text(80, 24, |f| view::render(f, &s));
    assert!(t.contains("more line(s) above (↑ Home)"), "{t}");
    assert!(!t.contains("more line(s) below (↓ scrolls)"), "{t}");
}

#[test]
fn trend_and_pattern_panels() {
    let mut s = demo();
    let mut d = Recorded::new();
    press(&mut s, &mut d, &[Key::Esc]);
    with_data(&mut s);
    press(&mut s, &mut d, &[Key::Char('s'), Key::Home, Key::Enter]);
    press(
        &mut s,
        &mut d,
        &[Key::Char('n'), Key::Char('n'), Key::Char('n')],
    );
    let t = screen("trend", &s, 120, 40);
    assert!(
        t.contains("storage I/O: now") && t.contains("30 points"),
        "{t}"
    );
    press(&mut s, &mut d, &[Key::Char('v')]);
    let t = screen("io-pattern", &s, 120, 40);
    assert!(t.contains("Repeated: the same"), "{t}");
}

#[test]
fn exec_trace_and_offcpu_panels() {
    use kdiag::model::lab::Panel;
    let mut s = demo();
    let mut d = Recorded::new();
    press(&mut s, &mut d, &[Key::Esc]);
    with_data(&mut s);
    press(
        &mut s,
        &mut d,
        &[
            Key::Char('s'),
            Key::Home,
            Key::Enter,
            Key::Char('n'),
            Key::Char('n'),
        ],
    );
    s.lab.steps[2].panels = vec![Panel::ExecTrace, Panel::Offcpu];
    let events = exec_events();
    let findings = kdiag::analysis::exec_failure::explain(&events, &[]);
    s.update(Msg::Data(Data::Exec(events, findings)));
    let t = screen("exec-trace", &s, 120, 40);
    assert!(
        t.contains("2 execs seen, 1 failed") && t.contains("ENOEXEC"),
        "{t}"
    );
    press(&mut s, &mut d, &[Key::Char('v')]);
    // Before its first window, then with one: the writer blocked in D on
    // the device, wait points and paths as kdiag offcpu reports them.
    let t = screen("offcpu-waiting", &s, 120, 40);
    assert!(
        t.contains("the first window comes after three seconds"),
        "{t}"
    );
    let mut p = Profile::default();
    p.cost.wall_secs = 3.0;
    let stack = |frames: &[&str], state, ms: u64, n| Stack {
        comm: "io-app".into(),
        frames: frames.iter().map(|f| frame_of(f)).collect(),
        samples: n,
        weight: ms * 1_000_000,
        user_depth: 4,
        state: Some(state),
        waker: None,
        ongoing: false,
    };
    p.stacks.push(stack(
        &[
            "main",
            "rewrite_region",
            "write",
            "ksys_write_[k]",
            "folio_wait_bit_common_[k]",
            "schedule_[k]",
        ],
        OffState::D,
        2400,
        300,
    ));
    p.stacks.push(stack(
        &[
            "main",
            "rewrite_region",
            "write",
            "ksys_write_[k]",
            "schedule_[k]",
        ],
        OffState::R,
        100,
        20,
    ));
    s.update(Msg::Data(Data::Offcpu(Box::new(p))));
    let t = screen("offcpu", &s, 120, 40);
    assert!(t.contains("2.50 s blocked in 320 blocks over 3 s"), "{t}");
    assert!(
        t.contains("96.0%") && t.contains("D folio_wait_bit_common"),
        "{t}"
    );
    assert!(
        t.contains("rewrite_region → write → ksys_write [k] → folio_wait_bit_common [k]"),
        "{t}"
    );
}

#[test]
fn every_answer_right_gives_the_final_screen_and_keys_help() {
    let mut s = demo();
    let mut d = Recorded::new();
    press(&mut s, &mut d, &[Key::Esc]);
    with_data(&mut s);
    press(&mut s, &mut d, &[Key::Char('?')]);
    let t = screen("help", &s, 120, 40);
    assert!(t.contains("one more hint") && t.contains(ANSWERS), "{t}");
    press(
        &mut s,
        &mut d,
        &[
            Key::Esc,
            Key::Char('s'),
            Key::Home,
            Key::Enter,
            Key::Char('n'),
        ],
    );
    press(&mut s, &mut d, &typed("WS"));
    // The choice starts unselected: Enter alone answers nothing.
    press(&mut s, &mut d, &[Key::Enter]);
    assert!(!s.step_done(1), "Enter alone chose nothing");
    press(&mut s, &mut d, &[Key::Right, Key::Enter]);
    // A right choice stays on screen, with its ✓, when an arrow is pressed.
    let shown = |s: &State| s.answers[1].iter().map(|a| a.choice).collect::<Vec<_>>();
    let right = shown(&s);
    press(&mut s, &mut d, &[Key::Right, Key::Left, Key::Left]);
    assert_eq!(shown(&s), right, "the right choice changed on screen");
    press(&mut s, &mut d, &[Key::Char('n')]);
    s.update(Msg::Data(Data::Profile(Box::new(profile()))));
    for a in [
        "write",
        "io_app::write_pass",
        "/var/tmp/kdiag-io-app/data-1b2c.bin",
    ] {
        press(&mut s, &mut d, &typed(a));
    }
    press(&mut s, &mut d, &[Key::Enter, Key::Enter, Key::Char('n')]);
    press(
        &mut s,
        &mut d,
        &[Key::Right, Key::Right, Key::Right, Key::Enter],
    );
    press(&mut s, &mut d, &typed("10 MiB"));
    assert!(s.all_done(), "{:?}", s.answers);
    assert_eq!(s.overlay, Overlay::Final);
    let t = screen("final", &s, 120, 40);
    assert!(
        t.contains("Lab complete") && t.contains("Score: 15 of 15 points, 4 of 4 steps done"),
        "{t}"
    );
    press(&mut s, &mut d, &[Key::Char('q')]);
    assert!(s.quit);
}

#[test]
fn a_small_terminal_keeps_a_usable_layout() {
    let mut s = demo();
    let mut d = Recorded::new();
    press(&mut s, &mut d, &[Key::Esc]);
    with_data(&mut s);
    press(
        &mut s,
        &mut d,
        &[Key::Char('s'), Key::Home, Key::Enter, Key::Char('n')],
    );
    let t = screen("small-80x24", &s, 80, 24);
    // The steps' marks, the question lines, the panel and the keys all
    // show.
    for want in [
        "Step 2/4 [✓○○○]",
        "Type of its block",
        "synchronous",
        "iosnoop",
        "q quit",
        "score 1/15",
    ] {
        assert!(t.contains(want), "{want}: {t}");
    }
    assert!(t.contains("13812 WS"), "a request row fits: {t}");
}

/// A step that says how often the profile panel samples says the rate
/// the panel uses (and shows: "at 999 Hz").
#[test]
fn step_texts_give_the_profile_panels_rate() {
    let hz = kdiag::tui::lab::collect::PROFILE_HZ;
    let source = LabSource::default();
    let mut said = 0;
    for id in source.ids().unwrap() {
        for step in source.lab(&id).unwrap().steps {
            let text = kdiag::lab::medium::text_for(&step.text, Medium::App).replace('\n', " ");
            for sentence in text.split(". ").filter(|s| s.contains("panel")) {
                let Some((before, _)) = sentence.split_once(" times a second") else {
                    continue;
                };
                let rate = before.rsplit(' ').next().unwrap();
                assert_eq!(rate, hz.to_string(), "{id} {}: {sentence}", step.id);
                said += 1;
            }
        }
    }
    assert!(
        said >= 2,
        "the labs' texts give the panel's rate {said} times"
    );
}

/// Whether `label`'s chart shows: a sparkline on its line or the next.
fn charted(screen: &str, label: &str) -> bool {
    let lines: Vec<&str> = screen.lines().collect();
    let bars = |l: &str| l.contains(['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█']);
    lines.iter().enumerate().any(|(i, l)| {
        l.starts_with(label) && (bars(l) || lines.get(i + 1).is_some_and(|n| bars(n)))
    })
}

/// Every line an answer of 0-demo's steps is read from, on screen at
/// 80x24 when the step says to read it: at once, or after ↓ with a marker
/// saying more is below. And on every screen the key bar keeps `q quit`.
#[test]
fn at_80x24_every_answer_bearing_line_shows() {
    const W: u16 = 80;
    const H: u16 = 24;
    /// Press ↓ until `want` shows (each screen before it must say more is
    /// below); the screen that shows it.
    fn shows(s: &mut State, d: &mut Recorded, want: &str, what: &str) -> String {
        for _ in 0..30 {
            let t = screens::text(W, H, |f| view::render(f, s));
            assert!(
                t.contains("q quit"),
                "{what}: the key bar keeps q quit:\n{t}"
            );
            if t.contains(want) {
                return t;
            }
            assert!(
                t.contains("more line(s) below"),
                "{what}: {want:?} is not on screen, and no marker says more is below:\n{t}"
            );
            press(s, d, &[Key::Down]);
        }
        panic!("{what}: {want:?} never shows at {W}x{H}");
    }
    let mut s = demo();
    let mut d = Recorded::new();
    press(&mut s, &mut d, &[Key::Esc]);
    with_data(&mut s);
    // who: sorted by WRITE/s, io-app's row and its user; the sort column
    // stays on screen.
    press(&mut s, &mut d, &[Key::Char('s'), Key::Home]);
    let t = shows(&mut s, &mut d, "WRITE/s▼", "who: the sort column");
    assert!(t.contains("USER"), "who: whose each process is:\n{t}");
    let row = t.lines().find(|l| l.trim_start().starts_with("13812"));
    assert!(
        row.is_some_and(|r| r.contains("you")),
        "who: io-app's row:\n{t}"
    );
    press(&mut s, &mut d, &[Key::Enter, Key::Char('n')]);
    // what: the requests' TYPE, then the process panel's threads' states.
    shows(&mut s, &mut d, "13812 WS", "what: a request's type");
    press(&mut s, &mut d, &[Key::Char('v')]);
    shows(
        &mut s,
        &mut d,
        "threads were: disk wait (D) 84%",
        "what: the threads' states",
    );
    // why: the profile reaches the program's function.
    press(&mut s, &mut d, &[Key::Char('n')]);
    s.update(Msg::Data(Data::Profile(Box::new(profile()))));
    shows(&mut s, &mut d, "io_app::write_pass", "why: the function");
    // trend: every chart of the trend panel, each with its label (a
    // steady loop, teeth or a ramp is read from them; at 80x24 the panel
    // once dropped the storage I/O chart), then the I/O pattern's verdict
    // and its region.
    press(&mut s, &mut d, &[Key::Char('n')]);
    let t = shows(&mut s, &mut d, "RSS", "trend: the charts");
    for label in ["CPU", "storage I/O", "RSS", "context switches"] {
        assert!(charted(&t, label), "trend: the {label} chart:\n{t}");
    }
    press(&mut s, &mut d, &[Key::Char('v')]);
    let t = shows(&mut s, &mut d, "Repeated:", "trend: the pattern");
    assert!(t.contains("trend: I/O pattern"), "{t}");
}

/// Every line of every step's text of every lab shows on some page at
/// 80x24 and at 120x40 as PgDn pages through it: a page is what shows
/// between the markers, so none is skipped (with five questions the text
/// pane is three lines, and a page of five once skipped two, the command
/// line of 3-memory's step 2 among them). PgDn held at the end and then
/// PgUp moves up at once.
#[test]
fn every_line_of_every_step_text_shows_when_paged() {
    let labs = LabSource::default().ids().unwrap();
    assert_eq!(labs.len(), 8, "the eight labs");
    for (w, h) in [(80, 24), (120, 40)] {
        for name in &labs {
            let (lab, checks) = lab::load(&LabSource::default(), name).unwrap();
            let shell = |_: usize| Vec::new();
            let view = lab_view(
                &lab,
                &checks,
                &shell,
                ANSWERS,
                Launch::default(),
                Medium::App,
            );
            let mut s = State::new(view, &[]);
            let mut d = Recorded::new();
            press(&mut s, &mut d, &[Key::Esc]);
            for step in 0..s.lab.steps.len() {
                let what = format!("{name} step {} at {w}x{h}", step + 1);
                let (shown, end) = page_through(&mut s, &mut d, w, h, &what);
                let x = shown.x;
                let want = kdiag::tui::lab::markdown::render(&s.step_text(step), w - x - 2);
                for line in want {
                    let line: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
                    let line = line.trim();
                    assert!(
                        line.is_empty() || shown.lines.iter().any(|l| l == line),
                        "{what}: {line:?} never on screen; shown:\n{}",
                        shown.lines.join("\n")
                    );
                }
                if end > 0 {
                    press(&mut s, &mut d, &[Key::PageDown; 5]);
                    press(&mut s, &mut d, &[Key::PageUp]);
                    let (_, above) = text_pane(&s, w, h);
                    assert!(
                        above < end,
                        "{what}: PgUp after the end moved to {above} of {end}"
                    );
                }
                press(&mut s, &mut d, &[Key::Char('n')]);
            }
        }
    }
}

/// The lines of the step's text pane seen while paging down, and where
/// the pane starts.
struct Shown {
    x: u16,
    lines: Vec<String>,
}

/// Page down through the step's text; what showed, and how many lines
/// were above the last page.
fn page_through(s: &mut State, d: &mut Recorded, w: u16, h: u16, what: &str) -> (Shown, usize) {
    let mut shown = Shown {
        x: 0,
        lines: Vec::new(),
    };
    for _ in 0..100 {
        let (pane, above) = text_pane(s, w, h);
        shown.x = pane.x;
        let more = pane
            .lines
            .iter()
            .any(|l| l.contains("more line(s) below: PgDn"));
        shown.lines.extend(pane.lines);
        if !more {
            return (shown, above);
        }
        press(s, d, &[Key::PageDown]);
    }
    panic!("{what}: PgDn never reaches the end");
}

/// The text pane's lines now (trimmed), its column, and the count its
/// "↑ N more line(s) above" marker gives (0 without one).
fn text_pane(s: &State, w: u16, h: u16) -> (Shown, usize) {
    let t = screens::text(w, h, |f| view::render(f, s));
    let rows: Vec<&str> = t.lines().collect();
    let heading = rows.iter().position(|l| l.contains(" Step ")).unwrap_or(0);
    let questions = rows
        .iter()
        .position(|l| l.contains(" Questions ─"))
        .unwrap_or_else(|| panic!("no questions:\n{t}"));
    let x = rows[questions].chars().take_while(|&c| c != 'Q').count() as u16 - 1;
    let lines: Vec<String> = rows[heading + 1..questions]
        .iter()
        .map(|l| {
            l.chars()
                .skip(x as usize + 1)
                .collect::<String>()
                .trim()
                .to_string()
        })
        .collect();
    let above = lines
        .first()
        .and_then(|l| l.strip_prefix("↑ "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    (Shown { x, lines }, above)
}

/// A finished lab reopened against a new workload: the pick's answer of
/// the last run is a PID that is gone. The pick shows the new workload's
/// process, and the panels and step texts follow it, never the old PID.
#[test]
fn a_reopened_finished_lab_picks_the_new_workload() {
    let (lab, checks) = lab::load(&LabSource::default(), "0-demo").unwrap();
    let shell = |_: usize| Vec::new();
    let d = Recorded::new();
    // As the front end checks the answers file at start: every graded
    // answer right, the live pick not (its process is gone).
    let given: Vec<Given> = d
        .right
        .iter()
        .map(|(k, v)| {
            let verdict = if *k == "who.pid" {
                Verdict::NotYet(d.fail[*k].clone())
            } else {
                Verdict::Right
            };
            (k.to_string(), v.to_string(), verdict)
        })
        .collect();
    let mut s = State::new(
        lab_view(
            &lab,
            &checks,
            &shell,
            ANSWERS,
            Launch::default(),
            Medium::App,
        ),
        &given,
    );
    s.reopen_finished(4242);
    assert!(s.all_done(), "{:?}", s.answers);
    assert_eq!(s.overlay, Overlay::Final);
    assert_eq!(s.chosen.as_ref().map(|c| c.pid), Some(4242));
    s.update(Msg::Key(Key::Esc));
    assert_eq!(s.step, 0);
    let t = screens::text(120, 40, |f| view::render(f, &s));
    assert!(t.contains("✓ 1. Who") && t.contains("4242"), "{t}");
    assert!(!t.contains(&PID.to_string()), "the old PID on screen:\n{t}");
}
