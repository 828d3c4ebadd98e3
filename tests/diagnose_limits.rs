//! `kdiag diagnose` on processes held back by their cgroups, each case
//! made real here with a v1 cgroup of the test's own (a CPU quota, a
//! blkio read-IOPS limit, a memory limit smaller than what the process
//! re-reads, an OOM kill), removed by a Drop guard. Each asserts the
//! verdict and the numbers the kernel gives (throttled periods, requests
//! against the limit, failed charges, refaults, OOM kills), not wall-clock
//! shares: the quota, the limit and the OOM are deterministic by
//! construction, whatever else the machine runs.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};

use common::own_cgroup::OwnCg;
use common::{c_fixture, command, diagnose_json, kdiag, require_root, stderr, stdout};
use serde_json::Value;

/// Kills and reaps a child at the end of a test, however it ends.
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The observation's reading of the cgroup at `path` in hierarchy `ctrl`.
fn cgroup<'a>(v: &'a Value, ctrl: &str, path: &str) -> &'a Value {
    v["observation"]["limits"]["cgroups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["controllers"] == ctrl && c["path"] == path)
        .unwrap_or_else(|| {
            panic!(
                "no {ctrl} cgroup {path} in {:#}",
                v["observation"]["limits"]
            )
        })
}

fn summary(v: &Value) -> String {
    common::verdict_text(&v["diagnosis"])
}

#[test]
fn a_spin_loop_under_a_cpu_quota_is_throttled_not_starved() {
    if !require_root("a_spin_loop_under_a_cpu_quota_is_throttled_not_starved") {
        return;
    }
    // 5% of a CPU: the loop spends its quota in every period however busy
    // the machine is, so every period it has ends throttled.
    let cg = OwnCg::new("cpu");
    cg.set("cpu.cfs_period_us", "100000");
    cg.set("cpu.cfs_quota_us", "5000");
    let spin = Reap(cg.spawn("exec sh -c 'while :; do :; done'"));
    let pid = spin.0.id().to_string();
    let v = diagnose_json(&["-p", &pid, "-d", "3", "--why", "none"]);
    let d = &v["diagnosis"];
    assert_eq!(d["verdict"], "cpu-quota", "{d:#}");
    assert!(
        summary(&v).contains(&format!(
            "0.05 CPUs (cpu.cfs_quota_us 5000 of 100000 µs) at v1 cpu {}",
            cg.path
        )),
        "{}",
        summary(&v)
    );
    let q = &cgroup(&v, "cpu", &cg.path)["cpu"];
    let (periods, throttled) = (
        q["periods"].as_u64().unwrap(),
        q["throttled"].as_u64().unwrap(),
    );
    assert!(periods >= 10 && throttled * 10 >= periods * 9, "{q:#}");
    let evidence = common::evidence_text(d).join("\n");
    assert!(
        evidence.contains("Thread states alone: sched"),
        "{evidence}"
    );
    assert!(
        evidence.contains("Pressure (machine, PSI): CPU some"),
        "{evidence}"
    );
    // The next step reads the quota; nothing looks for a competitor.
    let next = d["next"].to_string();
    assert!(
        next.contains(&format!("{}/cpu.stat", cg.dir.display())),
        "{next}"
    );
    assert!(
        !next.contains("kdiag top") && !next.contains("-a"),
        "{next}"
    );
}

#[test]
fn a_direct_reader_under_a_blkio_iops_limit_is_io_limited() {
    if !require_root("a_direct_reader_under_a_blkio_iops_limit_is_io_limited") {
        return;
    }
    // Each 4 KiB O_DIRECT read is a request the limit counts.
    let (cg, dd) = common::own_cgroup::iops_limited_reader("limits-direct-read");
    let dd = Reap(dd);
    let v = diagnose_json(&["-p", &dd.0.id().to_string(), "-d", "3", "--why", "none"]);
    let d = &v["diagnosis"];
    assert_eq!(d["verdict"], "io-limit", "{d:#}");
    assert!(
        summary(&v).contains("reads/s against the limit of 100 read IOPS")
            && summary(&v).contains(&format!("at v1 blkio {}", cg.path)),
        "{}",
        summary(&v)
    );
    let limit = &cgroup(&v, "blkio", &cg.path)["io"][0];
    assert_eq!(limit["read_iops"], 100, "{limit:#}");
    let window = v["observation"]["window_s"].as_f64().unwrap();
    let reads = limit["reads"].as_f64().unwrap();
    // At the limit, and not above it (blk-throttle lets a small burst by).
    assert!(
        reads >= 80.0 * window && reads <= 100.0 * window + 50.0,
        "{reads} reads in {window} s"
    );
    assert!(
        common::evidence_text(d)
            .join(
                "
"
            )
            .contains("Thread states alone: io")
    );
}

#[test]
fn a_file_reread_through_mmap_under_a_smaller_memory_limit_is_memory_limited() {
    if !require_root("a_file_reread_through_mmap_under_a_smaller_memory_limit_is_memory_limited") {
        return;
    }
    let file = Path::new(env!("CARGO_TARGET_TMPDIR")).join("limits-mmap-file");
    if std::fs::metadata(&file).map_or(true, |m| m.len() != 128 << 20) {
        // Written back before the reader starts: its DONTNEED cannot drop
        // dirty pages, which stay charged to this test's cgroup, so a new
        // file was read from the cache, not under the limit, until the
        // flusher came by (a verdict other than memory-limit, once, on a
        // fresh file under load).
        let ok = command("dd")
            .args(["if=/dev/zero", "bs=1M", "count=128", "conv=fsync"])
            .arg(format!("of={}", file.display()))
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(ok.success());
    }
    let cg = OwnCg::new("memory");
    cg.set("memory.limit_in_bytes", &(48u64 << 20).to_string());
    let reader = Reap(cg.spawn(&format!(
        "exec {} {} keep",
        c_fixture("mmap_read").display(),
        file.display()
    )));
    let v = diagnose_json(&["-p", &reader.0.id().to_string(), "-d", "3", "--why", "none"]);
    let d = &v["diagnosis"];
    assert_eq!(d["verdict"], "memory-limit", "{d:#}");
    assert!(
        summary(&v).contains(&format!("48 MiB at v1 memory {}", cg.path)),
        "{}",
        summary(&v)
    );
    let m = &cgroup(&v, "memory", &cg.path)["memory"];
    assert_eq!(m["max"], 48u64 << 20, "{m:#}");
    // Every pass reads 128 MiB through 48: most of it comes back.
    assert!(m["failcnt"].as_u64().unwrap() > 0, "{m:#}");
    assert!(m["refaults"].as_u64().unwrap() >= 10_000, "{m:#}");
}

#[test]
fn an_oom_killed_member_of_a_tree_is_named() {
    if !require_root("an_oom_killed_member_of_a_tree_is_named") {
        return;
    }
    let cg = OwnCg::new("memory");
    cg.set("memory.limit_in_bytes", &(32u64 << 20).to_string());
    // The shell outlives its child, which starts growing after 0.5 s (seen
    // by then) and is killed near 32 MiB.
    let sh = Reap(cg.spawn(&format!(
        "{} 500; exec sleep 30",
        c_fixture("grow").display()
    )));
    let pid = sh.0.id().to_string();
    let v = diagnose_json(&["-p", &pid, "--tree", "-d", "3", "--why", "none"]);
    let d = &v["diagnosis"];
    assert_eq!(d["verdict"], "oom-kill", "{d:#}");
    let grow = v["observation"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["comm"].as_str().is_some_and(|c| c.contains("grow")))
        .unwrap_or_else(|| panic!("grow not seen: {:#}", v["observation"]["members"]))
        .clone();
    assert_eq!(grow["ended"], true);
    assert!(
        summary(&v).contains(&format!(
            "killed 1 process in its memory cgroup v1 memory {} (limit 32 MiB); the tree's members that ended: PID {} ({})",
            cg.path,
            grow["pid"],
            grow["comm"].as_str().unwrap()
        )),
        "{}",
        summary(&v)
    );
    assert_eq!(cgroup(&v, "memory", &cg.path)["memory"]["oom_kill"], 1);
}

#[test]
fn a_command_kdiag_stops_at_the_end_is_no_exec_failure() {
    if !require_root("a_command_kdiag_stops_at_the_end_is_no_exec_failure") {
        return;
    }
    // Exec tracing runs all along (as root): kdiag's own SIGTERM at the end
    // of the window must not read as a failed exec.
    let out = kdiag()
        .args(["diagnose", "-d", "1", "--why", "all", "--", "sleep", "30"])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains("Verdict: idle"), "{text}");
    assert!(
        text.contains("Execs (") && text.contains("none failed"),
        "{text}"
    );
    assert!(
        !text.contains("Exec failures") && !text.contains("SIGTERM"),
        "{text}"
    );
}

/// `--unit NAME` and `--cgroup PATH`: every process of the cgroup is a
/// member (two unrelated ones here), and nothing outside it is; a path off
/// the cgroup file system and an unknown unit are refused.
#[test]
fn a_cgroup_and_a_unit_are_diagnosed_as_a_tree_of_their_processes() {
    if !require_root("a_cgroup_and_a_unit_are_diagnosed_as_a_tree_of_their_processes") {
        return;
    }
    let cg = OwnCg::named(
        "pids",
        &format!("kdiagtest-limits-{}.service", std::process::id()),
    );
    let unit = cg
        .path
        .trim_start_matches('/')
        .trim_end_matches(".service")
        .to_string();
    let spinner = Reap(cg.spawn("while :; do :; done"));
    let sleeper = Reap(cg.spawn("sleep 30"));
    let outside = Reap(command("sleep").arg("30").spawn().unwrap());
    let by_path = format!("pids{}", cg.path);
    let (by_unit, by_cgroup) = std::thread::scope(|s| {
        let c = s.spawn(|| diagnose_json(&["-d", "1", "--why", "none", "--cgroup", &by_path]));
        let u = diagnose_json(&["-d", "1", "--why", "none", "--unit", &unit]);
        (u, c.join().unwrap())
    });
    for v in [&by_unit, &by_cgroup] {
        let o = &v["observation"];
        assert_eq!(o["scope"], "cgroup", "{o}");
        assert_eq!(o["cgroup"], cg.dir.display().to_string(), "{o}");
        let members: Vec<i64> = o["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["pid"].as_i64().unwrap())
            .collect();
        for c in [&spinner, &sleeper] {
            assert!(members.contains(&(c.0.id() as i64)), "{members:?}");
        }
        assert!(!members.contains(&(outside.0.id() as i64)), "{members:?}");
        // The spinner's CPU is the tree's.
        assert!(
            o["totals"]["user_s"].as_f64().unwrap() + o["totals"]["system_s"].as_f64().unwrap()
                > 0.1,
            "{o}"
        );
    }
    for (args, want) in [
        (["--cgroup", "/tmp"], "no cgroup at /sys/fs/cgroup/tmp"),
        (["--cgroup", "pids/../../../etc"], "no cgroup at"),
        (["--unit", "kdiag-no-such-unit"], "no cgroup named for it"),
    ] {
        let out = kdiag()
            .args(["diagnose", "-d", "1"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
}
