//! The quick subset of the diagnose corpus (tests/scenarios/, issue 37):
//! the scenarios marked QUICK=1, each a real fault with its truth measured
//! by a tool that is not kdiag, run by tests/scenarios/run against this
//! build. Every one must get its expected verdict and key evidence; a
//! scenario whose software is missing counts against it, not as a pass.

mod common;

#[test]
fn the_quick_corpus_is_diagnosed_right() {
    if !common::require_root("the_quick_corpus_is_diagnosed_right") {
        return;
    }
    let run = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scenarios/run");
    let out = common::command(run)
        .arg("--quick")
        .env("KDIAG", env!("CARGO_BIN_EXE_kdiag"))
        .env("VERBOSE", "1")
        .output()
        .expect("tests/scenarios/run");
    let table = String::from_utf8_lossy(&out.stdout);
    let rows = table
        .lines()
        .filter(|l| l.ends_with(" right") || l.contains(" wrong (") || l.contains(" partial ("))
        .count();
    assert!(rows >= 15, "{rows} scenarios ran:\n{table}");
    assert!(
        out.status.success(),
        "{table}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
