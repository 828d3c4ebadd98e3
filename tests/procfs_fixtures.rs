//! Captured /proc trees (tests/data/procfs/<case>/, made by capture.sh)
//! read through the injectable root, with the expected `kdiag ps --json`
//! rows beside each one (`ps.json`, `ps-threads.json`), as inferno keeps its
//! expected outputs next to real inputs. The clock is the capture's own
//! (boot time + uptime), so the rows do not depend on when the test runs.
//! KDIAG_BLESS=1 rewrites the expected files after a deliberate change.

use std::path::Path;

use kdiag::analysis::ps::{self, Context};
use kdiag::analysis::top;
use kdiag::sys::procfs::{self, Reader};

fn rows(root: &str, threads: bool) -> String {
    let system = procfs::system_in(root).expect("system files");
    let cx = Context {
        uptime_secs: system.uptime_secs,
        hz: system.hz,
        mem_total_kib: system.memory.total_kib,
        boot_time: system.boot_time,
        now: (system.boot_time as f64 + system.uptime_secs) as i64,
        utc_offset: 0,
    };
    let mut reader = Reader::with_root(root);
    // As `kdiag ps` reads them: each process's threads' states for its S column.
    reader.top_extras = !threads;
    let procs = reader.all(threads).expect("processes");
    let rows: Vec<ps::Row> = procs
        .iter()
        .map(|p| ps::row(p, &cx, top::process_state(p)))
        .collect();
    serde_json::to_string_pretty(&ps::forest(rows)).unwrap() + "\n"
}

fn check(case: &Path, threads: bool) {
    let name = if threads {
        "ps-threads.json"
    } else {
        "ps.json"
    };
    let expected_file = case.join(name);
    let got = rows(case.to_str().unwrap(), threads);
    if std::env::var_os("KDIAG_BLESS").is_some() {
        std::fs::write(&expected_file, &got).unwrap();
    }
    let expected = std::fs::read_to_string(&expected_file)
        .unwrap_or_else(|e| panic!("{}: {e} (KDIAG_BLESS=1 writes it)", expected_file.display()));
    assert_eq!(got, expected, "{} changed", expected_file.display());
}

#[test]
fn ps_rows_from_captured_proc_trees() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/procfs");
    let mut cases = 0;
    for entry in std::fs::read_dir(&data).unwrap() {
        let case = entry.unwrap().path();
        if case.is_dir() {
            check(&case, false);
            check(&case, true);
            cases += 1;
        }
    }
    assert!(cases > 0, "no captured trees under {}", data.display());
}

/// tests/data/procfs/bio: the bio workload under its read throttle, 20 of
/// its 22 threads in D while the main thread sleeps. top's row says D with
/// how many, and the header counts the threads as the load average does.
#[test]
fn top_shows_the_threads_in_d_of_the_bio_workload() {
    use kdiag::analysis::top;
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/procfs/bio");
    let mut reader = Reader::with_root(root);
    reader.top_extras = true;
    let procs = reader.all(false).expect("processes");
    let bio = procs.iter().find(|p| p.comm == "bio").expect("bio");
    assert_eq!(bio.state, 'S', "the captured main thread sleeps");
    let rows = top::rows(&[], &procs, 1.0, 100, 1 << 20);
    let row = rows.iter().find(|r| r.pid == bio.pid).unwrap();
    assert_eq!(kdiag::tui::top::state_cell(row), "D 20/22");
    let counts = top::task_counts(&procs);
    assert_eq!((counts.disk, counts.threads_d), (1, 20));
    // The thread view: each thread its own row and state.
    let threads = reader.all(true).expect("threads");
    let rows = top::thread_rows(&[], &threads, 1.0, 100, 1 << 20);
    assert_eq!(rows.len(), 22);
    assert_eq!(rows.iter().filter(|r| r.state == 'D').count(), 20);
    assert!(
        rows.iter()
            .all(|r| kdiag::tui::top::state_cell(r).len() == 1)
    );
    assert_eq!(top::task_counts(&threads).threads_d, 20);
}
