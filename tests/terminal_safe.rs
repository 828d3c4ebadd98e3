//! Another process's argv reaches the terminal escaped: a command line
//! holding `ESC ]0;X BEL ESC [2J` (retitle the window, clear the screen)
//! prints as `?]0;X??[2J` in execsnoop's lines, never as raw escapes.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

#[test]
fn execsnoop_prints_another_process_s_escape_sequences_escaped() {
    if !require_root("execsnoop_prints_another_process_s_escape_sequences_escaped") {
        return;
    }
    let evil = "\u{1b}]0;X\u{7}\u{1b}[2J";
    let d = tempfile::tempdir().unwrap();
    // A name of its own, so that other tests' execs do not matter.
    let prog = d.path().join("kdiagesc");
    std::fs::copy("/bin/true", &prog).unwrap();
    let snoop = kdiag()
        .args(["execsnoop", "-n", "kdiagesc", "-d", "3"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Exec it again and again while execsnoop runs: whenever it has
    // attached, some execs are seen.
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(2800) {
        Command::new(&prog).arg(evil).status().unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = snoop.wait_with_output().unwrap();
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert!(text.contains("?]0;X??[2J"), "{text}");
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
}
