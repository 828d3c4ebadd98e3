//! `kdiag diagnose --tree`: the drill-downs trace the members that carry
//! the verdict, never a parent that only waits for them.

mod common;

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::require_root;
use serde_json::Value;

/// A parent asleep in pause() with two children (named kdiag-kid) that
/// spin 10 ms, read 4 KiB of `file` from the disk (its cache dropped
/// first), sleep 5 ms, again until the parent is gone.
const FAMILY: &str = r#"
import os, random, signal, sys, time
path, parent = sys.argv[1], os.getpid()
def kid():
    with open('/proc/self/comm', 'w') as f:
        f.write('kdiag-kid')
    fd = os.open(path, os.O_RDONLY)
    pages = os.fstat(fd).st_size // 4096
    while os.getppid() == parent:
        end = time.perf_counter() + 0.01
        while time.perf_counter() < end:
            pass
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.pread(fd, 4096, random.randrange(pages) * 4096)
        time.sleep(0.005)
    os._exit(0)
kids = [os.fork() for _ in range(2)]
if 0 in kids:
    kid()
print(*kids, flush=True)
signal.pause()
"#;

struct Family {
    parent: Child,
    kids: Vec<i64>,
}

impl Drop for Family {
    fn drop(&mut self) {
        // The children leave when their parent is gone.
        let _ = self.parent.kill();
        let _ = self.parent.wait();
    }
}

fn family(file: &std::path::Path) -> Family {
    let mut parent = Command::new("python3")
        .args(["-c", FAMILY])
        .arg(file)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(parent.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let kids = line
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    // The children have named themselves.
    let t = Instant::now();
    let family = Family { parent, kids };
    while family.kids.iter().any(|k| {
        std::fs::read_to_string(format!("/proc/{k}/comm")).unwrap_or_default() != "kdiag-kid\n"
    }) {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the children did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    family
}

/// Every folded line of a drill-down's flame graph is a child's.
fn only_kids(why: &Value, flame: &str) -> usize {
    let lines = why[flame]["lines"].as_array().expect(flame);
    assert!(!lines.is_empty(), "{flame}: nothing recorded: {why}");
    for l in lines {
        let l = l.as_str().unwrap();
        assert!(l.starts_with("kdiag-kid;"), "{flame} has {l}");
    }
    lines.len()
}

/// `--tree` on a parent that sleeps while its children work: the verdict's
/// carriers are the children, and the CPU profile, the off-CPU profile
/// and the block I/O trace all hold their samples and only theirs.
#[test]
fn a_tree_is_drilled_into_the_members_that_work_not_the_sleeping_parent() {
    if !require_root("a_tree_is_drilled_into_the_members_that_work_not_the_sleeping_parent") {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("data");
    let mut f = std::fs::File::create(&file).unwrap();
    f.write_all(&vec![7u8; 8 << 20]).unwrap();
    f.sync_all().unwrap();
    let fam = family(&file);
    let parent = fam.parent.id().to_string();
    let v = common::diagnose_json(&["-d", "2", "--why", "all", "-p", &parent, "--tree"]);
    let d = &v["diagnosis"];
    let carriers: Vec<i64> = d["carriers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["pid"].as_i64().unwrap())
        .collect();
    let mut sorted = carriers.clone();
    sorted.sort();
    let mut kids = fam.kids.clone();
    kids.sort();
    assert_eq!(sorted, kids, "verdict {}: {d}", d["verdict"]);
    let why = &v["why"];
    assert!(why["skipped"].as_array().unwrap().is_empty(), "{why}");
    only_kids(why, "cpu_flame");
    only_kids(why, "offcpu_flame");
    assert!(why["cpu"]["samples"].as_u64().unwrap() > 0, "{why}");
    assert!(why["offcpu"]["total_ns"].as_u64().unwrap() > 0, "{why}");
    let storage = &why["storage"];
    assert!(storage["reads"].as_u64().unwrap() > 0, "{storage}");
    for s in storage["submitters"].as_array().unwrap() {
        if s["kernel"].is_null() {
            let pid = s["pid"].as_i64().unwrap();
            assert!(fam.kids.contains(&pid), "{pid} is not a child: {storage}");
        }
    }
    // The command to run next names a child (`sched`, when the machine is
    // busy, names `kdiag top`).
    let next = d["next"][0].as_str().unwrap();
    if d["verdict"] != "sched" {
        assert!(
            fam.kids.iter().any(|k| next.contains(&format!("-p {k} "))),
            "{next}"
        );
    }
}
