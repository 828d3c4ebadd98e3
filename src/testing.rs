//! Helpers for unit tests that need privileges: under CI=true a privileged
//! test that cannot run fails; elsewhere it skips with a message.

/// Whether a test needing root may proceed.
pub fn require_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail. (Not through
    // sys/, which imports this module for its own tests.)
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(!ci, "{test}: needs root, and CI=true forbids skipping");
    eprintln!("SKIPPED {test}: needs root (run the tests with sudo)");
    false
}
