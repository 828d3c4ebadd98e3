//! The course's regression suite on screen: every lab played in the real
//! app (tmux, 120x40 and 80x24) with the learner's reference strategy.
//! The PID is picked from the process table sorted as the step says; an
//! answer the step says a panel shows is read off that panel (the test
//! waits until the panel shows the seed's truth) before it is typed; the
//! evidence is saved from its panel, or made with the step's shell command;
//! every step's text agrees with its panel (the PID it names, 4-bio's D
//! count); each step's text panels bring their answer-bearing line on
//! screen (at once, or by ↓ under a marker saying more is below), and the
//! key bar keeps `q quit`, at 80x24 as at 120x40; the lab ends at its full score and kdiag exits 0 (left with q,
//! or Ctrl-C).
//!
//! Labs run one after another: each measures a workload, and two at once
//! would disturb each other's rates.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::lab_run::{one_workload, workload_pid};
use common::{Tmux, kdiag, require_root, stderr};
use serde_json::Value;

/// How the reference learner plays one lab.
struct Strategy {
    lab: &'static str,
    /// The process table's sort columns step 1 names, the first the
    /// table shows.
    sort: &'static [&'static str],
    /// Answers a panel shows as typed (the rest are worked out: counts,
    /// verdicts, what a rate or period comes to).
    shown: &'static [&'static str],
}

const LABS: [Strategy; 8] = [
    Strategy {
        lab: "0-demo",
        sort: &["WRITE/s"],
        shown: &["what.io_type", "why.function"],
    },
    Strategy {
        lab: "1-io",
        sort: &["WRITE/s"],
        shown: &["why.function"],
    },
    Strategy {
        lab: "2-scheduling",
        sort: &["%CPU"],
        shown: &["why.job_function"],
    },
    Strategy {
        lab: "3-memory",
        sort: &["%CPU"],
        shown: &["why.function"],
    },
    Strategy {
        lab: "4-bio",
        sort: &["VCSW/s"],
        shown: &["why.io_type", "why.function"],
    },
    Strategy {
        lab: "5-bad-elf",
        sort: &["PID"],
        shown: &["what.errno", "what.signal"],
    },
    Strategy {
        lab: "6-lock",
        sort: &["VCSW/s"],
        shown: &["why.function", "why.holder_syscall"],
    },
    Strategy {
        lab: "7-trend",
        sort: &["RES", "%MEM"],
        shown: &["why.function"],
    },
];

/// Panel titles as the app draws them (model::lab::Panel::title's ends).
const EVIDENCE_PANELS: [(&str, &str); 2] = [
    ("artifacts.profile", "(profile)"),
    ("artifacts.offcpu", "(off-CPU)"),
];

/// A lab's definition, checks and reference answers, from the repository.
struct Lab {
    id: String,
    workload: String,
    args: Vec<String>,
    steps: Vec<Step>,
    solution: toml::Table,
}

struct Step {
    title: String,
    /// Its panels, as lab.toml names them.
    panels: Vec<String>,
    questions: Vec<Question>,
}

struct Question {
    key: String,
    label: String,
    /// The step's `inputs` type: pick, choice, evidence, number, text.
    input: String,
    choices: Vec<String>,
}

fn read_toml(path: PathBuf) -> toml::Table {
    let text = std::fs::read_to_string(&path).unwrap();
    text.parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn load(id: &str) -> Lab {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lab = read_toml(root.join(format!("labs/{id}/lab.toml")));
    let checks = read_toml(root.join(format!("checks/{id}.toml")));
    let solution = read_toml(root.join(format!("checks/solutions/{id}.toml")));
    let strings = |v: Option<&toml::Value>| -> Vec<String> {
        v.and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|s| Some(s.as_str()?.to_string()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let checks = checks["checks"].as_array().unwrap();
    let steps = lab["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let inputs = s.get("inputs").and_then(|i| i.as_table());
            let questions = checks
                .iter()
                .filter(|c| c["step"].as_str() == s["id"].as_str())
                .map(|c| {
                    let key = c["id"].as_str().unwrap().to_string();
                    let input = inputs.and_then(|i| i.get(&key));
                    let kind = match input.and_then(|i| i.get("type")) {
                        Some(t) => t.as_str().unwrap().to_string(),
                        None if key.starts_with("artifacts.") => "evidence".into(),
                        None => "text".into(),
                    };
                    Question {
                        label: c["name"].as_str().unwrap().to_string(),
                        input: kind,
                        choices: strings(input.and_then(|i| i.get("choices"))),
                        key,
                    }
                })
                .collect();
            Step {
                title: s["title"].as_str().unwrap().to_string(),
                panels: strings(s.get("panels")),
                questions,
            }
        })
        .collect();
    Lab {
        id: id.to_string(),
        workload: lab["workload"].as_str().unwrap().to_string(),
        args: strings(lab.get("workload_args")),
        steps,
        solution,
    }
}

/// The seed's truth: `kdiag workload describe`'s `expect`.
fn truth(lab: &Lab, seed: &str) -> Value {
    let out = kdiag()
        .args(["workload", "describe", "--seed", seed, &lab.workload])
        .args(&lab.args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["expect"].clone()
}

/// A reference answer's template (`{expect.file}`, `{live.pid}`, `1M`)
/// filled in.
fn fill(template: &str, expect: &Value, pid: u32) -> String {
    let mut out = template.to_string();
    while let Some(start) = out.find('{') {
        let end = start + out[start..].find('}').unwrap();
        let name = &out[start + 1..end];
        let value = match name.split_once('.') {
            Some(("live", "pid")) => pid.to_string(),
            Some(("expect", path)) => {
                let v = path
                    .split('.')
                    .fold(expect, |v, p| match p.parse::<usize>() {
                        Ok(i) => &v[i],
                        Err(_) => &v[p],
                    });
                v.as_str().map_or(v.to_string(), str::to_string)
            }
            _ => panic!("a template the test does not know: {name}"),
        };
        out.replace_range(start..=end, &value);
    }
    out
}

/// The reference answer to `key` (`who.pid` is `[answers.who] pid`).
fn answer(lab: &Lab, key: &str, expect: &Value, pid: u32) -> String {
    let (step, name) = key.split_once('.').unwrap();
    let v = &lab.solution["answers"][step][name];
    fill(v.as_str().unwrap(), expect, pid)
}

/// The text right of the steps list (the step, its questions, its panel):
/// the whole screen in a window too narrow for the list.
fn right(screen: &str) -> String {
    let listed = screen
        .lines()
        .nth(1)
        .is_some_and(|l| l.starts_with(" Steps "));
    screen
        .lines()
        .map(|l| match l.split_once('│') {
            Some((_, r)) if listed => r,
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The panel's part of the screen: from its title line down.
fn panel(screen: &str) -> String {
    let right = right(screen);
    let lines: Vec<&str> = right.lines().collect();
    let questions = lines.iter().position(|l| l.starts_with(" Questions ─"));
    // Its title: " STEP: title · PID ..." (questions' lines start with
    // two spaces or more, the heading with a capital).
    let title = |l: &&str| {
        let mut c = l.chars();
        c.next() == Some(' ') && c.next().is_some_and(|c| c.is_ascii_lowercase()) && l.contains(':')
    };
    let from = questions
        .and_then(|q| lines[q..].iter().position(title).map(|i| q + i))
        .unwrap_or(lines.len());
    lines[from..].join("\n")
}

/// The line of question `label` (its label may be cut) and its mark (·, ✓,
/// ✗) and whether it has the focus.
fn question_line(screen: &str, label: &str) -> Option<(char, bool)> {
    right(screen).lines().find_map(|l| {
        let focus = l.starts_with('▸');
        let rest = l.strip_prefix("▸ ").or_else(|| l.strip_prefix("  "))?;
        let mut chars = rest.chars();
        let mark = chars.next()?;
        if !matches!(mark, '·' | '✓' | '✗') {
            return None;
        }
        let shown = chars.as_str().trim_start();
        // "label: value", or a long label alone ("label:"), value below.
        let shown = shown.split_once(": ").map_or(shown, |(l, _)| l);
        let shown = shown.trim_end().trim_end_matches(':');
        (!shown.is_empty() && label.starts_with(shown)).then_some((mark, focus))
    })
}

/// The table's sort column, as its summary line says.
fn sorted_by(screen: &str) -> Option<String> {
    let rest = screen.split_once("sorted by ")?.1;
    let end = rest.find(['▼', '▲', ' '])?;
    Some(rest[..end].to_string())
}

/// The PID of the highlighted row, from the screen with its styles (`tmux
/// capture-pane -e`): the row drawn reversed below the header.
fn highlighted(styled: &str) -> Option<u32> {
    // tmux writes a style only where it changes, so a reversed header
    // carries on into a reversed first row with no escape before it: the
    // style is followed across lines, as the terminal would.
    let mut reversed = false;
    let mut found = None;
    for l in styled.lines() {
        // The row starts after the steps list's border, where there is one;
        // the list's own styles still count for what follows.
        let r = l.split_once('│').map_or(l, |(_, r)| r);
        let row_from = l.len() - r.len();
        let mut rest = l;
        let mut at_start = None;
        while !rest.is_empty() {
            if let Some(seq) = rest.strip_prefix("\x1b[")
                && let Some(end) = seq.find(|c: char| c.is_ascii_alphabetic())
            {
                if &seq[end..end + 1] == "m" {
                    for p in seq[..end].split(';') {
                        match p {
                            "" | "0" | "27" => reversed = false,
                            "7" => reversed = true,
                            _ => {}
                        }
                    }
                }
                rest = &seq[end + 1..];
                continue;
            }
            if l.len() - rest.len() >= row_from {
                at_start.get_or_insert(reversed);
            }
            let c = rest.chars().next().unwrap();
            rest = &rest[c.len_utf8()..];
        }
        if found.is_none()
            && at_start == Some(true)
            && let Some(pid) = common::strip_ansi(r)
                .split_whitespace()
                .next()
                .and_then(|w| w.parse().ok())
        {
            found = Some(pid);
        }
    }
    found
}

/// The visible rows' PIDs, top down.
fn rows(screen: &str) -> Vec<u32> {
    let right = right(screen);
    right
        .lines()
        .skip_while(|l| !(l.starts_with("PID") && l.contains("COMMAND")))
        .skip(1)
        .map_while(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

fn styled(t: &Tmux) -> String {
    t.screen_styled()
}

/// Sort the table by the first of `titles` it offers, with s, one press
/// at a time, each waiting for its effect.
fn sort_by(t: &Tmux, titles: &[&str]) {
    let mut offered = Vec::new();
    for title in titles {
        match sort_through(t, title) {
            Ok(()) => return,
            Err(seen) => offered = seen,
        }
    }
    panic!("s never sorted by any of {titles:?} (it went through {offered:?})");
}

/// Press s until the table is sorted by `title`; the columns it went
/// through when it never is.
fn sort_through(t: &Tmux, title: &str) -> Result<(), Vec<String>> {
    let mut now = sorted_by(&t.wait_for("the process table", |s| sorted_by(s).is_some())).unwrap();
    let mut seen = Vec::new();
    while now != title {
        if seen.contains(&now) {
            return Err(seen);
        }
        seen.push(now.clone());
        t.keys(&["s"]);
        let before = now.clone();
        now = sorted_by(&t.wait_for("the next sort column", |s| {
            sorted_by(s).is_some_and(|c| c != before)
        }))
        .unwrap();
    }
    Ok(())
}

/// Highlight `pid`'s row with the arrows: it must be among the rows the
/// table shows (sorted as the step says), then ↑ ↓ reach it. A row out of
/// sight is waited for at the top (a writer in bursts rises when it
/// writes: a small window shows few rows), then walked down to; at the
/// bottom, back to the top.
fn highlight(t: &Tmux, pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut waited = false;
    loop {
        let s = styled(t);
        let (at, want) = (highlighted(&s), rows(&common::strip_ansi(&s)));
        if at == Some(pid) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "PID {pid} never highlighted; screen:\n{}",
            common::strip_ansi(&s)
        );
        let (Some(i), Some(h)) = (
            want.iter().position(|&p| p == pid),
            at.and_then(|a| want.iter().position(|&p| p == a)),
        ) else {
            if !waited {
                waited = true;
                t.keys(&["Home"]);
                let rises = Instant::now() + Duration::from_secs(8);
                while Instant::now() < rises && !rows(&t.screen()).contains(&pid) {
                    std::thread::sleep(Duration::from_millis(200));
                }
                continue;
            }
            // Not in sight: move the highlight (the table keeps it in
            // sight) until the row shows.
            t.keys(&["Down"]);
            let moved = Instant::now() + Duration::from_secs(2);
            while Instant::now() < moved && highlighted(&styled(t)) == at {
                std::thread::sleep(Duration::from_millis(50));
            }
            waited = highlighted(&styled(t)) != at;
            continue;
        };
        t.keys(&[if i > h { "Down" } else { "Up" }]);
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Give question `label` the focus (Tab cycles through the step's).
fn focus(t: &Tmux, label: &str) {
    for _ in 0..12 {
        let s = t.wait_for("the questions", |s| question_line(s, label).is_some());
        if question_line(&s, label).unwrap().1 {
            return;
        }
        t.keys(&["Tab"]);
        t.wait_for("the focus to move", |n| {
            question_line(n, label) != question_line(&s, label) || n != s
        });
    }
    panic!("{label} never had the focus:\n{}", t.screen());
}

/// Wait for question `label`'s ✓; a ✗ fails with the screen.
fn right_answer(t: &Tmux, label: &str, what: &str) -> String {
    let s = t.wait_up_to(Duration::from_secs(20), what, |s| {
        matches!(question_line(s, label), Some(('✓' | '✗', _))) || s.contains("Lab complete")
    });
    if s.contains("Lab complete") {
        // The last answer: the final screen covers the questions.
        return s;
    }
    assert_eq!(question_line(&s, label).unwrap().0, '✓', "{what}:\n{s}");
    s
}

/// Show the step's panels one after another (v) until one shows `value`.
fn read_off_panel(t: &Tmux, value: &str, key: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut switched = Instant::now();
    loop {
        let s = t.screen();
        if panel(&s).contains(value) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{key}: no panel shows {value:?}; screen:\n{s}"
        );
        // As the learner would: wait for the panel, then scroll it (↓),
        // then try the step's next panel (v).
        let waited = switched.elapsed();
        if waited > Duration::from_secs(12) {
            t.keys(&["Home", "v"]);
            switched = Instant::now();
        } else if waited > Duration::from_secs(3) {
            t.keys(&["Down"]);
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The text panels' answer-bearing lines: (lab.toml's name, the panel's
/// title, the line a step reads on it).
const BEARING: [(&str, &str, &str); 3] = [
    ("process", "the process's rates", "threads were:"),
    ("io-pattern", "I/O pattern", "Repeated:"),
    ("exec-trace", "failed execs (exec-trace)", "execs seen"),
];

/// Each of the step's text panels brings its answer-bearing line on
/// screen: at once, or by ↓ while a marker says more is below (as the
/// data comes, within a minute). Then back to the step's first panel.
fn bearing_lines_show(t: &Tmux, lab: &str, step: &Step) {
    for (name, title, line) in BEARING {
        if !step.panels.iter().any(|p| p == name) {
            continue;
        }
        show_panel(t, title);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let s = t.screen();
            if !panel(&s).lines().next().is_some_and(|l| l.contains(title)) {
                show_panel(t, title);
                continue;
            }
            if panel(&s).contains(line) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{lab} {}: {line:?} never came on screen in the panel {title}:\n{s}",
                step.title
            );
            if panel(&s).contains("more line(s) below") {
                t.keys(&["Down"]);
                t.wait_for("the panel to scroll", |n| n != s);
            } else {
                std::thread::sleep(Duration::from_millis(300));
            }
        }
        t.keys(&["Home"]);
    }
}

/// Bring the panel titled `title` on screen.
fn show_panel(t: &Tmux, title: &str) {
    // "K of N" from the title's "(v: panel K of N)": the screen may change
    // for other reasons before the app reads v (a message, new data), and
    // a second v then brings the first panel back.
    let index = |s: &str| {
        let first = panel(s).lines().next()?.to_string();
        let (_, rest) = first.split_once("(v: panel ")?;
        Some(rest.chars().take_while(|c| *c != ')').collect::<String>())
    };
    let shown = |s: &str| panel(s).lines().next().is_some_and(|l| l.contains(title));
    for _ in 0..6 {
        let s = t.screen();
        // tmux may capture a frame half drawn (after n: the new step's
        // heading beside the last step's panel title), so a title is
        // believed only when a capture a moment later shows it too.
        if shown(&s) {
            std::thread::sleep(Duration::from_millis(200));
            if shown(&t.screen()) {
                return;
            }
            continue;
        }
        t.keys(&["v"]);
        t.wait_for("the next panel", |n| match (index(&s), index(n)) {
            (Some(before), Some(now)) => before != now,
            _ => panel(n).lines().next() != panel(&s).lines().next(),
        });
    }
    panic!("no panel {title}:\n{}", t.screen());
}

/// Run the solution's shell command for evidence `key` as the step
/// suggests and record its file with `kdiag answer`, from another shell.
fn evidence_from_shell(lab: &Lab, key: &str, root: &Path, seed: &str, pid: u32, expect: &Value) {
    let artifact = lab.solution["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["key"].as_str() == Some(key))
        .unwrap_or_else(|| panic!("no command makes {key}"));
    let file = root.join(artifact["file"].as_str().unwrap());
    let args: Vec<String> = artifact["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            a.as_str()
                .unwrap()
                .replace("{file}", &file.display().to_string())
                .replace("{kdiag}", env!("CARGO_BIN_EXE_kdiag"))
                .replace("{seed}", seed)
        })
        .map(|a| fill(&a, expect, pid))
        .collect();
    let out = kdiag().args(&args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let out = kdiag()
        .args(["answer", &lab.id, key])
        .arg(&file)
        .arg("--dir")
        .arg(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Step text and panels agree: the text names the PID picked, never
/// another; 4-bio's table shows the D threads the text speaks of.
fn text_agrees(lab: &str, screen: &str, pid: u32) {
    let right = right(screen);
    for line in right.lines() {
        // A number cut by a box drawn over the panel (the final screen at
        // 80x24: "PID 2027│" of 20271) is not a PID the text names.
        let cut = |w: &str| {
            line.split(w)
                .nth(1)
                .and_then(|after| after.chars().next())
                .is_some_and(|c| ('\u{2500}'..='\u{257f}').contains(&c))
        };
        for w in line
            .split(|c: char| !c.is_ascii_alphanumeric())
            .collect::<Vec<_>>()
            .windows(2)
        {
            if w[0] == "PID"
                && let Ok(n) = w[1].parse::<u32>()
                && !cut(&format!("PID {}", w[1]))
            {
                assert_eq!(n, pid, "the screen names another PID:\n{screen}");
            }
        }
    }
    let header = right.lines().find(|l| l.starts_with("sorted by "));
    if let (true, Some(header)) = (lab == "4-bio", header) {
        // The header's count of threads in D, in any window the lab runs in.
        let d: u32 = header
            .split_once(" in D (disk wait)")
            .and_then(|(a, _)| a.rsplit(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("the header counts the D threads: {header}"));
        let row = right
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&pid.to_string()))
            .unwrap_or_else(|| panic!("bio's row:\n{screen}"));
        let in_d: u32 = row
            .split_once(" D ")
            .and_then(|(_, r)| r.split('/').next()?.parse().ok())
            .unwrap_or_else(|| panic!("bio's row shows its D threads: {row}"));
        assert!(
            in_d > 0 && d >= in_d,
            "header {d} in D, row {in_d}:\n{screen}"
        );
    }
}

fn play(s: &Strategy, width: u16, height: u16) {
    let _one = one_workload();
    let lab = load(s.lab);
    let root = tempfile::tempdir().unwrap();
    let seed = format!("screen-{}-{width}", s.lab);
    let expect = truth(&lab, &seed);
    let bin = env!("CARGO_BIN_EXE_kdiag");
    let t = Tmux::start_sized(
        &format!(
            "{bin} lab {} --seed {seed} --dir {}; echo EXITED rc=$?; sleep 600",
            lab.id,
            root.path().display()
        ),
        width,
        height,
    );
    let pid = workload_pid(root.path(), &lab.id);
    t.wait_for("the welcome", |s| s.contains("Press any key to start"));
    t.keys(&["Space"]);
    let n = lab.steps.len();
    for (i, step) in lab.steps.iter().enumerate() {
        // "Step 2/4: " beside the steps list, "Step 2/4 [✓○○○]: " without.
        let heading = format!(" Step {}/{n}", i + 1);
        let title: String = step.title.chars().take(20).collect();
        let shown = t.wait_for("the step", |s| s.contains(&heading) && s.contains(&title));
        assert!(
            shown.contains("q quit"),
            "{} {}: the key bar keeps q quit:\n{shown}",
            lab.id,
            step.title
        );
        if i > 0 {
            bearing_lines_show(&t, &lab.id, step);
        }
        let mut picked = false;
        for q in &step.questions {
            let want = match q.input.as_str() {
                "evidence" => String::new(),
                _ => answer(&lab, &q.key, &expect, pid),
            };
            let what = format!("{} {}={want}", lab.id, q.key);
            match q.input.as_str() {
                "pick" if picked => {}
                "pick" => {
                    sort_by(&t, s.sort);
                    highlight(&t, pid);
                    text_agrees(&lab.id, &t.screen(), pid);
                    focus(&t, &q.label);
                    t.keys(&["Enter"]);
                    picked = true;
                }
                "choice" => {
                    focus(&t, &q.label);
                    assert!(q.choices.contains(&want), "{what}: not a choice");
                    let shown = format!("◂ {want} ▸");
                    for _ in 0..=q.choices.len() {
                        if t.screen().contains(&shown) {
                            break;
                        }
                        let before = t.screen();
                        t.keys(&["Right"]);
                        t.wait_for("the next choice", |s| s != before);
                    }
                    t.keys(&["Enter"]);
                }
                "evidence" => match EVIDENCE_PANELS.iter().find(|(k, _)| *k == q.key) {
                    Some((_, title)) => {
                        show_panel(&t, title);
                        t.wait_up_to(Duration::from_secs(30), "the panel's data", |s| {
                            panel(s).lines().count() > 4 && !panel(s).contains("waiting")
                        });
                        // Enter opens the path's box, Enter alone saves the
                        // panel's data.
                        focus(&t, &q.label);
                        t.keys(&["Enter"]);
                        t.wait_for("the path's box", |s| s.contains("Enter alone saves"));
                        t.keys(&["Enter"]);
                    }
                    None => evidence_from_shell(&lab, &q.key, root.path(), &seed, pid, &expect),
                },
                _ => {
                    if s.shown.contains(&q.key.as_str()) {
                        read_off_panel(&t, &want, &q.key);
                    }
                    focus(&t, &q.label);
                    t.keys(&["Enter"]);
                    t.keys(&["-l", &want]);
                    t.keys(&["Enter"]);
                }
            }
            right_answer(&t, &q.label, &what);
        }
        let s = t.screen();
        text_agrees(&lab.id, &s, pid);
        if i + 1 < n {
            t.keys(&["n"]);
        }
    }
    let s = t.wait_for("the final screen", |s| s.contains("Lab complete"));
    assert!(s.contains("steps done"), "{s}");
    let full = t.screen();
    let (got, max) = full
        .split_once("Score: ")
        .and_then(|(_, r)| {
            let (g, r) = r.split_once(" of ")?;
            Some((g.to_string(), r.split_whitespace().next()?.to_string()))
        })
        .unwrap_or_else(|| panic!("the score:\n{full}"));
    assert_eq!(got, max, "{}: full score\n{full}", lab.id);
    // Left with q, or with Ctrl-C in the small window: the same end, 0 for
    // a finished lab.
    t.keys(&[if width < 100 { "C-c" } else { "q" }]);
    let s = t.wait_for("kdiag to end", |s| s.contains("EXITED rc="));
    assert!(s.contains("EXITED rc=0"), "{s}");
}

fn play_both_sizes(lab: &str) {
    if !require_root(&format!("{lab} on screen")) {
        return;
    }
    let s = LABS.iter().find(|s| s.lab == lab).unwrap();
    for (w, h) in [(120, 40), (80, 24)] {
        let t = Instant::now();
        play(s, w, h);
        eprintln!("{lab} at {w}x{h}: {:.0} s", t.elapsed().as_secs_f64());
    }
}

#[test]
fn demo_on_screen() {
    play_both_sizes("0-demo");
}

#[test]
fn io_on_screen() {
    play_both_sizes("1-io");
}

#[test]
fn scheduling_on_screen() {
    play_both_sizes("2-scheduling");
}

#[test]
fn memory_on_screen() {
    play_both_sizes("3-memory");
}

#[test]
fn bio_on_screen() {
    play_both_sizes("4-bio");
}

#[test]
fn bad_elf_on_screen() {
    play_both_sizes("5-bad-elf");
}

#[test]
fn lock_on_screen() {
    play_both_sizes("6-lock");
}

#[test]
fn trend_on_screen() {
    play_both_sizes("7-trend");
}
