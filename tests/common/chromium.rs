//! Headless Chromium for the tests of kdiag's HTML pages (the diagnose
//! report, the class summary): the page as a browser reads it, and every
//! console message it logged.

use std::path::Path;
use std::process::Command;

use super::{require_program, stderr, stdout};

/// Chromium (Debian's `chromium`), or None where it is missing outside CI.
pub fn browser(test: &str) -> Option<&'static str> {
    require_program(test, &["chromium", "chromium-browser"], "chromium")
}

/// Run headless Chromium on `page` with `args`, its own profile folder,
/// its console on stderr, and timers run: (stdout, the console lines).
pub fn headless(browser: &str, page: &Path, args: &[&str]) -> (String, Vec<String>) {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=1",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{browser}: {}", stderr(&out));
    // Every console message (log, warning, error, uncaught exception) is
    // logged as INFO:CONSOLE; the report writes none.
    let console = stderr(&out)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(String::from)
        .collect();
    (stdout(&out), console)
}

/// A wall heat map page (`render/wall_html.rs`, alone or in the diagnose
/// report) after `clicks` on the cells of root `root`, in turn: the
/// heading of the selected range and the flame graph's markup from there on.
pub fn heat_selected(browser: &str, page: &str, root: usize, clicks: &[u64]) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("selected.html");
    let script: String = clicks
        .iter()
        .map(|i| {
            format!(
                "document.querySelector('#heat [data-root=\"{root}\"] [data-slice=\"{i}\"]')\
                 .dispatchEvent(new MouseEvent('click', {{bubbles: true}}));\n"
            )
        })
        .collect();
    let page = page.replace("</body>", &format!("<script>\n{script}</script>\n</body>"));
    std::fs::write(&path, page).unwrap();
    let (dom, console) = headless(browser, &path, &["--dump-dom"]);
    assert!(console.is_empty(), "the page logged: {console:?}");
    let heading = dom[dom.find("id=\"range\">").expect("the heat map's heading")..]
        .split(['<', '>'])
        .nth(1)
        .unwrap()
        .to_string();
    // Chromium's DOM is HTML, not XML: the flame graph's frames by text.
    let flame = dom[dom.find("id=\"flame\"").expect("a flame graph")..].to_string();
    (heading, flame)
}
