//! The command line itself: help, completions, man page, usage errors.

mod common;
use common::*;

#[test]
fn help_lists_every_subcommand() {
    let out = run_kdiag(&["--help"]);
    assert!(out.status.success());
    let text = stdout(&out);
    for sub in [
        "doctor",
        "ps",
        "top",
        "time",
        "profile",
        "iosnoop",
        "exec-trace",
        "execsnoop",
        "elf-check",
        "workload",
        "completions",
        "man",
    ] {
        assert!(
            text.contains(&format!("  {sub} ")),
            "--help lacks {sub}:\n{text}"
        );
    }
}

#[test]
fn completions_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef kdiag"),
        ("fish", "complete -c kdiag"),
    ] {
        let out = run_kdiag(&["completions", shell]);
        assert!(out.status.success(), "{shell}");
        assert!(
            stdout(&out).contains(marker),
            "{shell} completion lacks {marker}"
        );
    }
}

#[test]
fn man_page_is_roff() {
    let out = run_kdiag(&["man"]);
    assert!(out.status.success());
    assert!(stdout(&out).starts_with(".ie") || stdout(&out).contains(".TH kdiag"));
}

#[test]
fn unknown_subcommand_is_a_usage_error() {
    let out = run_kdiag(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("Usage"));
}
