//! `kdiag diagnose --record/--replay/--report`: one real run of cpu-burn
//! (with its CPU drill-down, so a flame graph exists) recorded, then
//! replayed to the very same text, JSON and HTML; the HTML report opened in
//! headless Chromium (the rendered DOM, a screenshot, no console message;
//! its heat map's selected range redraws its wall-clock flame graph);
//! damaged and foreign records refused with their line.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use common::{command, kdiag, require_root, stderr, stdout, workload};
use serde_json::Value;

/// The recorded run, shared by the tests (made once).
struct Recorded {
    dir: tempfile::TempDir,
    /// The live run's stdout (its text report).
    text: String,
}

impl Recorded {
    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// `kdiag diagnose -d 2 --why all` on cpu-burn (a CPU and an off-CPU
/// profile: two flame graphs in one page), recorded, with every report;
/// None when not root (the drill-downs need it).
fn recorded(test: &str) -> Option<&'static Recorded> {
    if !require_root(test) {
        return None;
    }
    static RUN: OnceLock<Recorded> = OnceLock::new();
    Some(RUN.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n);
        let out = kdiag()
            .args(["diagnose", "-d", "2", "--why", "all", "--record"])
            .arg(p("run.jsonl"))
            .args(["--report", "html"])
            .arg(p("report.html"))
            .args(["--report", "json"])
            .arg(p("report.json"))
            .args(["--report", "text"])
            .arg(p("report.txt"))
            .arg("--")
            .arg(workload("cpu-burn"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        Recorded {
            text: stdout(&out),
            dir,
        }
    }))
}

fn replay(args: &[&str], file: &Path) -> Output {
    kdiag()
        .args(["diagnose", "--replay"])
        .arg(file)
        .args(args)
        .output()
        .unwrap()
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn a_replay_shows_the_same_report() {
    let Some(r) = recorded("a_replay_shows_the_same_report") else {
        return;
    };
    let record = r.file("run.jsonl");
    let lines: Vec<String> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let header: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(header["format"], "kdiag-diagnose", "{}", lines[0]);
    assert_eq!(header["version"], 2, "{}", lines[0]);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(header["kernel"], kernel.trim());
    let kinds: Vec<Value> = lines[1..]
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["kind"].clone())
        .collect();
    assert_eq!(kinds, ["observation", "diagnosis", "why"]);

    // Text: byte for byte what the live run printed, and its --report text.
    let out = replay(&[], &record);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(r.text.starts_with("Verdict: "), "{}", r.text);
    assert_eq!(stdout(&out), r.text);
    assert_eq!(
        std::fs::read_to_string(r.file("report.txt")).unwrap(),
        r.text
    );
    // JSON and HTML: the same documents again.
    let out = replay(&["--json"], &record);
    assert!(out.status.success(), "{}", stderr(&out));
    let again: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(again, json(&r.file("report.json")));
    assert!(again["why"]["cpu"]["top_self"].is_array(), "{again}");
    let html = r.file("replayed.html");
    let out = replay(&["--report", "html", html.to_str().unwrap()], &record);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read(&html).unwrap(),
        std::fs::read(r.file("report.html")).unwrap()
    );

    // Without root: an unprivileged user replays a copy of their own.
    if let Some((uid, gid)) = common::learner("a_replay_shows_the_same_report") {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
        let copy = dir.path().join("copy.jsonl");
        std::fs::copy(&record, &copy).unwrap();
        std::os::unix::fs::chown(&copy, Some(uid), Some(gid)).unwrap();
        let out = command("sudo")
            .args(["-n", "-u", common::LEARNER, env!("CARGO_BIN_EXE_kdiag")])
            .args(["diagnose", "--replay"])
            .arg(&copy)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(stdout(&out), r.text);
    }
}

/// The number of `points` of the polyline in the chart of `series`.
fn chart_points(dom: &str, series: &str) -> usize {
    let figure = dom
        .split(&format!(
            "<figure class=\"chart\" data-series=\"{series}\">"
        ))
        .nth(1)
        .unwrap_or_else(|| panic!("no chart of {series}"));
    let figure = &figure[..figure.find("</figure>").unwrap()];
    if figure.contains("<circle") {
        return 1;
    }
    figure
        .split("points=\"")
        .nth(1)
        .map_or(0, |p| p[..p.find('"').unwrap()].split(' ').count())
}

/// The inline flame graph `id` of the rendered page: it has frames, and its
/// own script ran on it (inferno's init drops the SVG's fixed width).
fn flame_graph<'a>(dom: &'a str, id: &str) -> &'a str {
    let flame = dom
        .split(&format!("<svg id=\"{id}\""))
        .nth(1)
        .unwrap_or_else(|| panic!("no {id}"));
    let tag = &flame[..flame.find('>').unwrap()];
    assert!(
        !tag.contains(" width="),
        "{id}: inferno's init did not run: {tag}"
    );
    let flame = &flame[..flame.find("</svg>").unwrap()];
    let frames = flame.matches("<g><title>").count();
    assert!(frames >= 3, "{id}: {frames} frames: {flame}");
    flame
}

#[test]
fn the_html_report_renders_in_chromium() {
    let test = "the_html_report_renders_in_chromium";
    let Some(r) = recorded(test) else { return };
    let Some(browser) = common::chromium::browser(test) else {
        return;
    };
    let page = r.file("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: nothing to fetch.
    for external in [" src=", "href=", "@import", "url(http"] {
        assert!(!html.contains(external), "{external} in the report");
    }
    let doc = json(&r.file("report.json"));

    let (dom, console) = common::chromium::headless(browser, &page, &["--dump-dom"]);
    assert!(console.is_empty(), "console messages: {console:#?}");
    // The verdict and evidence, as the JSON has them.
    let verdict = doc["diagnosis"]["verdict"].as_str().unwrap();
    assert!(
        dom.contains(&format!("Verdict: <b>{verdict}</b>")),
        "{verdict}: {dom}"
    );
    let first = common::evidence_text(&doc["diagnosis"]).remove(0);
    assert!(
        dom.contains(
            &first
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
        )
    );
    // One chart per series, each with every point of its series: the
    // trend's series.
    let series = doc["observation"]["trend"]["series"].as_array().unwrap();
    assert!(!series.is_empty(), "no time series: {}", doc["observation"]);
    assert_eq!(
        dom.matches("<figure class=\"chart\"").count(),
        series.len(),
        "{dom}"
    );
    for s in series {
        let name = s["name"].as_str().unwrap();
        let points = s["points"].as_array().unwrap().len();
        assert_eq!(chart_points(&dom, name), points, "{name}");
    }
    // The CPU flame graph inline, with its frames and the hottest function
    // among them; the off-CPU one too when that drill-down could run.
    let flame = flame_graph(&dom, "flame-cpu");
    let hot = doc["why"]["cpu"]["top_self"][0]["name"].as_str().unwrap();
    assert!(flame.contains(hot.split("::").last().unwrap()), "{hot}");
    if doc["why"]["offcpu"].is_object() {
        flame_graph(&dom, "flame-offcpu");
    } else {
        eprintln!("no off-CPU flame graph: {}", doc["why"]["skipped"]);
    }
    // The storage drill-down's latency histogram, a column per bucket.
    if let Some(latency) = doc["why"]["storage"]["latency_us"].as_array() {
        let chart = dom
            .split("data-histogram=\"latency\">")
            .nth(1)
            .expect("the latency histogram");
        let chart = &chart[..chart.find("</figure>").unwrap()];
        assert_eq!(
            chart.matches("<rect class=\"column\"").count(),
            latency.len()
        );
    }
    assert!(dom.contains("kdiag's own cost"));

    // A screenshot of the page: a PNG of the window's size, not blank.
    let png = r.file("report.png");
    let (_, console) = common::chromium::headless(
        browser,
        &page,
        &[
            "--window-size=1280,1800",
            &format!("--screenshot={}", png.display()),
        ],
    );
    assert!(console.is_empty(), "console messages: {console:#?}");
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let be = |b: &[u8]| u32::from_be_bytes(b.try_into().unwrap());
    assert_eq!((be(&bytes[16..20]), be(&bytes[20..24])), (1280, 1800));
    // A blank page of that size compresses to a few kilobytes.
    assert!(bytes.len() > 40_000, "{} bytes", bytes.len());
}

/// Headless Chromium driven over the DevTools protocol on a pipe
/// (`--remote-debugging-pipe`: it reads commands on fd 3 and answers on
/// fd 4, each message a JSON text ending in NUL).
struct Devtools {
    child: std::process::Child,
    to: std::fs::File,
    from: std::io::BufReader<std::fs::File>,
    next_id: u64,
    session: Option<String>,
    _profile: tempfile::TempDir,
}

impl Devtools {
    fn open(browser: &str, page: &Path) -> Devtools {
        use std::os::fd::FromRawFd;
        use std::os::unix::process::CommandExt;
        // Each pipe's ends moved to fds above 10, so dup2 onto 3 and 4 in
        // the child never meets one of them.
        let pipe = || {
            let mut fds = [0; 2];
            // SAFETY: fds is a valid array of two ints.
            assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
            fds.map(|fd| {
                // SAFETY: fd is ours; the copy is close-on-exec too.
                let high = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) };
                unsafe { libc::close(fd) };
                high
            })
        };
        let [browser_reads, we_write] = pipe();
        let [we_read, browser_writes] = pipe();
        let profile = tempfile::tempdir().unwrap();
        let mut cmd = command(browser);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--remote-debugging-pipe",
            "--window-size=1280,1800",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("file://{}", page.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
        // SAFETY: only dup2, which is async-signal-safe, between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(browser_reads, 3) < 0 || libc::dup2(browser_writes, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        // SAFETY: the fds are ours and each is wrapped once.
        unsafe {
            libc::close(browser_reads);
            libc::close(browser_writes);
        }
        let (to, from) = unsafe {
            (
                std::fs::File::from_raw_fd(we_write),
                std::fs::File::from_raw_fd(we_read),
            )
        };
        let mut d = Devtools {
            child,
            to,
            from: std::io::BufReader::new(from),
            next_id: 0,
            session: None,
            _profile: profile,
        };
        let targets = d.call("Target.getTargets", serde_json::json!({}));
        let page_id = targets["targetInfos"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .expect("a page target")["targetId"]
            .clone();
        let attached = d.call(
            "Target.attachToTarget",
            serde_json::json!({"targetId": page_id, "flatten": true}),
        );
        d.session = Some(attached["sessionId"].as_str().unwrap().to_string());
        d
    }

    /// Send `method` and wait for its result (events in between are skipped).
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.try_call(method, params)
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    /// The same, with the protocol's error as an Err.
    fn try_call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        use std::io::{BufRead, Write};
        self.next_id += 1;
        let mut msg = serde_json::json!({"id": self.next_id, "method": method, "params": params});
        if let Some(s) = &self.session {
            msg["sessionId"] = Value::String(s.clone());
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).unwrap();
        loop {
            let mut buf = Vec::new();
            let n = self.from.read_until(0, &mut buf).unwrap();
            assert!(n > 0, "chromium closed the pipe during {method}");
            buf.pop();
            let reply: Value = serde_json::from_slice(&buf).unwrap();
            if reply["id"] == self.next_id {
                return match reply["error"].is_null() {
                    true => Ok(reply["result"].clone()),
                    false => Err(reply["error"].clone()),
                };
            }
        }
    }

    /// Wait until the report is the page, loaded, and its timers ran (the
    /// first evaluations may meet the blank page it replaces).
    fn wait_loaded(&mut self) {
        let loaded = "location.protocol === 'file:' && document.readyState === 'complete'";
        for _ in 0..200 {
            let r = self.try_call(
                "Runtime.evaluate",
                serde_json::json!({"expression": loaded, "returnByValue": true}),
            );
            if r.is_ok_and(|r| r["result"]["value"] == true) {
                // inferno's init finishes in a timer.
                std::thread::sleep(std::time::Duration::from_millis(300));
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the report did not load in 10 s");
    }

    /// The value of a JavaScript expression in the page.
    fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            serde_json::json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(r["exceptionDetails"].is_null(), "{expression}: {r}");
        r["result"]["value"].clone()
    }
}

impl Drop for Devtools {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_flame_graphs_zoom_in_chromium() {
    let test = "the_flame_graphs_zoom_in_chromium";
    let Some(r) = recorded(test) else { return };
    let Some(browser) = common::chromium::browser(test) else {
        return;
    };
    let mut page = Devtools::open(browser, &r.file("report.html"));
    page.wait_loaded();
    // Click the widest frame above the root of the CPU graph: inferno's
    // script zooms that graph (its "Reset Zoom" shows, frames elsewhere
    // hide) and leaves the other graph as it was.
    let zoomed = page.eval(
        r#"(() => {
            const unzoom = id => document.querySelector('#' + id + ' [id="unzoom"]');
            const frames = [...document.querySelectorAll('#flame-cpu [id="frames"] > g')];
            const y = g => parseFloat(g.querySelector('rect').getAttribute('y'));
            const w = g => parseInt(g.querySelector('rect').getAttribute('fg:w'));
            const bottom = Math.max(...frames.map(y));
            const above = frames.filter(g => y(g) < bottom - 1).sort((a, b) => w(b) - w(a));
            const small = frames.filter(g => w(g) < w(above[0])).length;
            above[0].querySelector('rect').dispatchEvent(new MouseEvent('click', {bubbles: true}));
            const hidden = frames.filter(g => g.classList.contains('hide')).length;
            const other = unzoom('flame-offcpu');
            return {
                frames: frames.length,
                before: small,
                hidden,
                shown: !unzoom('flame-cpu').classList.contains('hide'),
                other: other === null || other.classList.contains('hide'),
            };
        })()"#,
    );
    assert!(zoomed["frames"].as_u64().unwrap() >= 3, "{zoomed}");
    assert_eq!(
        zoomed["shown"], true,
        "the CPU graph did not zoom: {zoomed}"
    );
    assert_eq!(
        zoomed["other"], true,
        "the off-CPU graph zoomed too: {zoomed}"
    );
    // Search highlights matches and says how many, within that graph.
    let hot = json(&r.file("report.json"))["why"]["cpu"]["top_self"][0]["name"]
        .as_str()
        .unwrap()
        .rsplit("::")
        .next()
        .unwrap()
        .to_string();
    let matched = page.eval(&format!(
        "window.prompt = () => '{hot}'; \
         document.querySelector('#flame-cpu [id=\"search\"]').dispatchEvent(new MouseEvent('click', {{bubbles: true}})); \
         document.querySelector('#flame-cpu [id=\"matched\"]').textContent"
    ));
    assert!(
        matched.as_str().is_some_and(|m| m.starts_with("Matched: ")),
        "{matched}"
    );
}

/// The thread time a heading states (`..., 1.234 s of thread time`).
fn thread_time(heading: &str) -> f64 {
    let head = heading.strip_suffix(" s of thread time").expect(heading);
    head.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn the_heat_map_selects_a_range_in_chromium() {
    let test = "the_heat_map_selects_a_range_in_chromium";
    let Some(r) = recorded(test) else { return };
    let Some(browser) = common::chromium::browser(test) else {
        return;
    };
    let doc = json(&r.file("report.json"));
    let wall = &doc["why"]["wall"];
    assert!(wall.is_object(), "no heat map data: {}", doc["why"]);
    let page = std::fs::read_to_string(r.file("report.html")).unwrap();
    assert_eq!(page.matches("id=\"heat\"").count(), 1);
    // The threads' time in slices 5..=29 (0.1 s to 0.6 s), from the data.
    let (a, b) = (5u64, 29u64);
    let mut whole = 0u64;
    let mut in_range = 0u64;
    for s in wall["stacks"].as_array().unwrap() {
        whole += s["ns"].as_u64().unwrap();
        for slice in s["slices"].as_array().into_iter().flatten() {
            if (a..=b).contains(&slice[0].as_u64().unwrap()) {
                in_range += slice[1].as_u64().unwrap();
            }
        }
    }
    assert!(in_range > 0 && in_range < whole, "{in_range} of {whole}");

    let (heading, flame) = common::chromium::heat_selected(browser, &page, 0, &[]);
    assert!(heading.contains("the whole window"), "{heading}");
    assert!(
        (thread_time(&heading) - whole as f64 / 1e9).abs() < 0.002,
        "{heading}"
    );
    let hot = doc["why"]["cpu"]["top_self"][0]["name"].as_str().unwrap();
    let hot = hot.split("::").last().unwrap();
    assert!(flame.contains(hot), "{hot} not in the whole window's graph");
    // A range, clicked end first: its time only, and the burn within it.
    let (heading, flame) = common::chromium::heat_selected(browser, &page, 0, &[b, a]);
    assert!(heading.contains("0.10 s to 0.60 s"), "{heading}");
    assert!(
        (thread_time(&heading) - in_range as f64 / 1e9).abs() < 0.002,
        "{heading}: want {in_range} ns"
    );
    assert!(flame.contains(hot), "{hot} not in the range's graph");
}

#[test]
fn damaged_and_foreign_records_are_refused_with_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let header = r#"{"format":"kdiag-diagnose","version":2,"kdiag":"0.1.0","host":"h","kernel":"6.18","started":"2026-11-25T00:00:00Z"}"#;
    let cases = [
        (
            "foreign.jsonl",
            "{\"a\": 1}\n".to_string(),
            ":1: not a kdiag diagnose record",
        ),
        ("empty.jsonl", String::new(), ":1: empty"),
        (
            "newer.jsonl",
            header.replace("\"version\":2", "\"version\":7") + "\n",
            "format version 7",
        ),
        (
            "older.jsonl",
            header.replace("\"version\":2", "\"version\":1") + "\n",
            "record format version 1, whose verdicts are sentences",
        ),
        (
            "damaged.jsonl",
            format!("{header}\n{{\"kind\":\"observation\",\"data\":{{\"pid\":\n"),
            ":2: damaged",
        ),
        (
            "short.jsonl",
            format!("{header}\n"),
            "no observation record by the end",
        ),
    ];
    for (name, text, says) in cases {
        let path = write(name, &text);
        let out = replay(&[], &path);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(&path.display().to_string()), "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
        assert!(stdout(&out).is_empty(), "{name}");
    }
}

#[test]
fn record_files_are_checked_before_watching() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target");
    std::fs::write(&target, "keep").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let report = dir.path().join("r.html");
    let out = kdiag()
        .args(["diagnose", "--report", "html"])
        .arg(&report)
        .arg("--record")
        .arg(&link)
        .args(["-d", "30", "--", "sleep", "60"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("symbolic link"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("Watching"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    assert!(!report.exists(), "a report file was left behind");
    // A format kdiag does not write, and the same file twice.
    for args in [
        vec!["--report", "pdf", "x.pdf"],
        vec!["--record", "a", "--report", "html", "a"],
    ] {
        let out = kdiag()
            .arg("diagnose")
            .args(&args)
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
}
