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
