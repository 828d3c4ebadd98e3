//! Where watch's counters come from. With the BPF task iterator (the tier
//! `auto` picks as root), a scan opens none of the watched processes'
//! /proc files: strace sees every openat of the run. `--tier proc` is run
//! the same way and must show each process's stat opened at every scan,
//! so the count is seen to catch reads of /proc text; both tiers count the
//! same processes.

mod common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Child;

use common::{command, kdiag, require_program, require_root};

/// Sleeping processes of a name of their own (a copy of sleep), killed and
/// the copy removed at the end.
struct Sleepers {
    children: Vec<Child>,
    exe: PathBuf,
}

impl Drop for Sleepers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(&self.exe);
    }
}

const SLEEPERS: usize = 200;
const NAME: &str = "tiersleep";

fn sleepers(dir: &Path) -> Sleepers {
    let exe = dir.join(NAME);
    std::fs::copy("/bin/sleep", &exe).unwrap();
    let mut s = Sleepers {
        children: Vec::new(),
        exe,
    };
    for _ in 0..SLEEPERS {
        s.children
            .push(command(&s.exe).arg("600").spawn().expect("sleep starts"));
    }
    s
}

/// `kdiag watch --interval 1` for 3.5 s under `strace -f`: how many times
/// it opened a /proc file of one of `pids` (the files the /proc tier reads
/// per process: stat, io, the main thread's schedstat), the processes
/// its last scan read, and its stderr.
fn watched(tier: &str, dir: &Path, pids: &HashSet<u32>) -> (usize, u64, String) {
    let log = dir.join(format!("strace-{tier}"));
    let textfile = dir.join(format!("textfile-{tier}"));
    std::fs::create_dir_all(&textfile).unwrap();
    let out = command("strace")
        .args(["-f", "-qq", "-e", "trace=openat", "-o"])
        .arg(&log)
        .arg(kdiag().get_program())
        .args([
            "watch",
            "--interval",
            "1",
            "--duration",
            "3.5",
            "--tier",
            tier,
        ])
        .arg("--textfile")
        .arg(&textfile)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "watch --tier {tier}: {stderr}");
    let trace = std::fs::read_to_string(&log).unwrap();
    let opens = trace
        .lines()
        .filter_map(|l| l.split_once("openat(AT_FDCWD, \"/proc/")?.1.split_once('"'))
        .filter(|(path, _)| {
            let mut parts = path.split('/');
            let pid = parts.next().and_then(|p| p.parse::<u32>().ok());
            let rest: Vec<&str> = parts.collect();
            let per_process = match rest[..] {
                ["stat"] | ["io"] => true,
                ["task", tid, "schedstat"] => tid.parse::<u32>().ok() == pid,
                _ => false,
            };
            per_process && pid.is_some_and(|p| pids.contains(&p))
        })
        .count();
    let prom = std::fs::read_to_string(textfile.join("kdiag.prom")).unwrap();
    // Every process its last scan read (the sleepers' group itself is
    // exported only once sampled and among --top).
    let processes = prom
        .lines()
        .find_map(|l| l.strip_prefix("kdiag_watch_processes "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no kdiag_watch_processes in the textfile:\n{prom}"))
        as u64;
    std::fs::remove_dir_all(&textfile).unwrap();
    std::fs::remove_file(&log).unwrap();
    (opens, processes, stderr)
}

#[test]
fn the_iterator_tier_reads_no_proc_text() {
    if !require_root("the_iterator_tier_reads_no_proc_text")
        || require_program(
            "the_iterator_tier_reads_no_proc_text",
            &["strace"],
            "strace",
        )
        .is_none()
    {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("watch-tiers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let s = sleepers(&dir);
    let pids: HashSet<u32> = s.children.iter().map(|c| c.id()).collect();

    let (opens, processes, stderr) = watched("bpf", &dir, &pids);
    assert!(
        processes >= SLEEPERS as u64,
        "{processes} processes: {stderr}"
    );
    assert_eq!(
        opens, 0,
        "the BPF tier opened the sleepers' /proc files {opens} times"
    );

    // The same check catches the /proc tier: every sleeper's stat at each
    // of the run's scans (4 in 3.5 s; at least 2 under any load).
    let (opens, processes, stderr) = watched("proc", &dir, &pids);
    assert!(
        processes >= SLEEPERS as u64,
        "{processes} processes: {stderr}"
    );
    assert!(
        opens >= 2 * SLEEPERS,
        "the /proc tier opened them {opens} times"
    );
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}
