//! `kdiag diagnose --why`: the drill-downs beyond the profiles, on real
//! workloads, against their truth (`kdiag workload describe NAME --seed S`):
//! io-app's block I/O (synchronous writes of one range, again and again),
//! the processes a starved target competes with, bad-elf's exec failures
//! explained as exec-trace explains them, and what an unprivileged user
//! gets (the /proc parts, and the command for the rest).

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::{Mutex, MutexGuard};

use common::loop_disk::Ext4;
use common::own_cpu::OwnCpu;
use common::{Kids, command, kdiag, learner, require_root, stderr, stdout, workload};
use serde_json::Value;

/// Held by the tests that load the CPUs or the disk.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

const SEED: &str = "why-7";

/// `kdiag workload describe NAME --seed SEED`'s expectations.
fn truth(name: &str) -> Value {
    common::workload_truth(name, SEED)
}

/// `kdiag diagnose --json ARGS`, which must succeed.
fn diagnose(args: &[&str]) -> Value {
    common::diagnose_json(args)
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// io-app rewrites one region with O_SYNC: the storage drill-down shows
/// its synchronous writes (the request type its truth names) submitted by
/// io-app itself, the range written again and again, sizes and latencies.
/// `--why all`: on this fast disk the verdict may be `cpu` (copies into
/// the page cache, in the kernel) with storage the runner-up.
///
/// io-app writes on an ext4 of the test's own: its region is then one range
/// of the device. On the root disk a `sync` elsewhere (`stress-ng --io`)
/// wrote part of the first pass, and delayed allocation gave that part
/// blocks of its own, away from the rest: the region was several ranges,
/// rightly shown as such, and never the one range the truth names.
#[test]
fn the_storage_drill_down_shows_io_apps_synchronous_rewrites() {
    if !require_root("the_storage_drill_down_shows_io_apps_synchronous_rewrites") {
        return;
    }
    let _g = one_at_a_time();
    let t = truth("io-app");
    let app = workload("io-app");
    // Room for the region and the 256 MiB io-app leaves free.
    let fs = Ext4::new("io-app", 640 << 20);
    let scratch = fs.path().join("io-app");
    let scratch = scratch.to_str().unwrap();
    let v = diagnose(&[
        "--why",
        "all",
        "-d",
        "2",
        "--",
        app.to_str().unwrap(),
        "--seed",
        SEED,
        "--duration",
        "30s",
        "--scratch",
        scratch,
    ]);
    let pid = v["observation"]["pid"].as_u64().unwrap();
    let s = &v["why"]["storage"];
    assert!(s["requests"].as_u64().unwrap() > 0, "{s}");
    assert_eq!(s["reads"], 0, "io-app only writes: {s}");
    assert_eq!(s["types"][0]["name"], t["io_type"], "{s}");
    assert!(num(&s["sync_share"]) > 0.9, "O_SYNC: {s}");
    // Who submits: io-app itself, first.
    assert_eq!(s["submitters"][0]["pid"], pid, "{s}");
    assert!(s["submitters"][0]["kernel"].is_null(), "{s}");
    // The region, written again and again: io-app's ranges written twice
    // or more on the test's disk cover it exactly. One range when each
    // pass reached the device in order; adjacent pieces when the block
    // layer issued a pass's extents out of order (seen: 2 + 2 + 6 MiB,
    // each about 70 times), as the trace rightly shows.
    let region = t["region_bytes"].as_u64().unwrap();
    let repeated = s["repeated"].as_array().unwrap();
    let mut spans: Vec<(u64, u64)> = repeated
        .iter()
        .filter(|r| {
            r["disk"] == fs.disk()
                && r["op"] == "write"
                && r["pid"] == pid
                && r["times"].as_u64().unwrap() >= 2
        })
        .map(|r| {
            let start = r["sector"].as_u64().unwrap() * 512;
            (start, start + r["bytes"].as_u64().unwrap())
        })
        .collect();
    spans.sort_unstable();
    let (mut covered, mut reached) = (0, 0);
    for (start, end) in spans {
        covered += end.saturating_sub(start.max(reached));
        reached = reached.max(end);
    }
    assert_eq!(
        covered, region,
        "io-app's ranges written again and again cover {covered} bytes, not its \
         {region}-byte region: {s}"
    );
    let latencies: u64 = s["latency_us"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(latencies, s["requests"].as_u64().unwrap(), "{s}");
    assert!(!s["sizes"].as_array().unwrap().is_empty(), "{s}");
    // The blocking paths of the same seconds.
    assert!(!v["why"]["offcpu"].is_null(), "{}", v["why"]);

    // The text report shows it compactly.
    let out = kdiag()
        .args(["diagnose", "--why", "all", "-d", "1.5", "--"])
        .arg(&app)
        .args(["--seed", SEED, "--duration", "30s", "--scratch", scratch])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    for want in [
        "Storage (",
        &format!("types {} x", t["io_type"].as_str().unwrap()),
        "submits: io-app (",
        "latency p50 ",
        "repeated: the same ",
    ] {
        assert!(text.contains(want), "{want:?} missing:\n{text}");
    }
}

/// Two busy loops pinned to CPU 0 and a third as the target, pinned
/// there too: it waits for the CPU, and the drill-down names the two with
/// their shares, and its own. All three in a cpu cgroup of the test's own
/// with the largest weight, so the machine's other load on CPU 0 (it took
/// all but 3% from the target while other sessions built) stays a minor
/// share.
#[test]
fn waiting_for_a_cpu_names_the_competitors() {
    let _g = one_at_a_time();
    let own = OwnCpu::new("competitors");
    let spin = format!(
        "{}exec taskset -c 0 sh -c 'while :; do :; done'",
        OwnCpu::enter(own.as_ref())
    );
    let rivals = Kids(
        (0..2)
            .map(|_| command("sh").args(["-c", &spin]).spawn().unwrap())
            .collect(),
    );
    let v = diagnose(&["-d", "2", "--", "sh", "-c", &spin]);
    let d = &v["diagnosis"];
    assert_eq!(d["verdict"], "sched", "{d}");
    let c = &v["why"]["competition"];
    assert_eq!(c["target_cpus"], "0", "{c}");
    let target = num(&c["target_percent"]);
    assert!(target > 5.0 && target < 60.0, "{c}");
    let others = c["others"].as_array().unwrap();
    for r in &rivals.0 {
        let rival = others
            .iter()
            .find(|o| o["pid"] == r.id())
            .unwrap_or_else(|| panic!("rival {} not named: {c}", r.id()));
        assert!(num(&rival["cpu_percent"]) > 10.0, "{rival}");
        assert_eq!(rival["cpus"], "0", "{rival}");
    }
    assert!(
        num(&c["total_percent"]) <= 100.0 * c["cpus"].as_f64().unwrap() + 5.0,
        "{c}"
    );
}

/// bad-elf's file (the seed picks a defect that fails after the point of
/// no return; bad-magic fails before it): diagnose cannot run it, and
/// says why with exec-trace's own explanation, word for word: the errno,
/// the rule, the fields to fix.
#[test]
fn a_command_that_cannot_exec_is_explained_as_exec_trace_does() {
    if !require_root("a_command_that_cannot_exec_is_explained_as_exec_trace_does") {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let bad_elf = workload("bad-elf");
    for defect in [None, Some("bad-magic")] {
        let path = dir.join(format!("why-{}", defect.unwrap_or("seeded")));
        let mut make = command(&bad_elf);
        make.args(defect).args(["--seed", SEED, "-o"]).arg(&path);
        assert!(make.stdout(Stdio::null()).status().unwrap().success());
        let mut describe = command(&bad_elf);
        describe.args(defect).args(["--seed", SEED, "--describe"]);
        let t: Value = serde_json::from_slice(&describe.output().unwrap().stdout).unwrap();
        let t = &t["expect"];

        let out = kdiag()
            .args(["diagnose", "--json", "-d", "1", "--"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{}", stdout(&out));
        if t["stage"] == "before-point-of-no-return" {
            assert_eq!(out.status.code(), Some(126), "{}", stderr(&out));
        }
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
        let f = &v["why"]["exec"]["failures"][0];
        assert_eq!(f["errno"], t["errno"], "{f}");
        let cause = f["cause"]
            .as_str()
            .unwrap_or_else(|| panic!("no cause: {f}"));
        if defect.is_none() {
            // A program header's fields, named (bad-magic's rule speaks
            // of the magic bytes instead).
            for field in t["fix_fields"].as_array().unwrap() {
                assert!(cause.contains(field.as_str().unwrap()), "{field}: {cause}");
            }
        }
        // exec-trace's own explanation, word for word.
        let traced = kdiag()
            .args(["exec-trace", "--json", "--"])
            .arg(&path)
            .output()
            .unwrap();
        let traced: Value = serde_json::from_slice(&traced.stdout).unwrap();
        assert_eq!(f["text"], traced["findings"][0]["text"]);

        // The text report says it, and the error follows.
        let out = kdiag()
            .args(["diagnose", "-d", "1", "--"])
            .arg(&path)
            .output()
            .unwrap();
        let text = stdout(&out);
        assert!(text.starts_with("Why it could not run:"), "{text}");
        assert!(
            text.contains(f["text"].as_str().unwrap()),
            "{text}\n{}",
            stderr(&out)
        );
        let _ = std::fs::remove_file(&path);
    }
}

/// bad-elf as a service: every 2 s it starts its file, which the kernel
/// kills during the exec. Diagnosing the service explains the children's
/// failures, with how many failed the same way, and makes them the verdict
/// (the service itself only sleeps between attempts).
#[test]
fn a_service_whose_children_fail_exec_is_explained() {
    if !require_root("a_service_whose_children_fail_exec_is_explained") {
        return;
    }
    let t = truth("bad-elf");
    let service = command(workload("bad-elf"))
        .args(["--seed", SEED, "--duration", "30s"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = service.id().to_string();
    let _kids = Kids(vec![service]);
    let v = diagnose(&["-d", "4.5", "-p", &pid]);
    let d = &v["diagnosis"];
    assert_eq!(d["verdict"], "exec", "{d:#}");
    assert!(
        common::verdict_text(d).contains(&format!("failed with {}", t["errno"].as_str().unwrap())),
        "{d:#}"
    );
    assert!(
        common::evidence_text(d)[0].starts_with("Thread states alone: idle"),
        "{d:#}"
    );
    assert_eq!(d["next"][0], format!("sudo kdiag exec-trace -p {pid}"));
    let e = &v["why"]["exec"];
    let f = &e["failures"][0];
    assert!(f["times"].as_u64().unwrap() >= 2, "{e}");
    assert_eq!(f["errno"], t["errno"], "{f}");
    assert_eq!(f["family"], "after-point-of-no-return", "{f}");
    assert!(
        f["cause"]
            .as_str()
            .is_some_and(|c| c.contains(t["fix_fields"][0].as_str().unwrap())),
        "{f}"
    );
}

/// As the learner, without sudo, on the learner's own cpu-burn: the
/// verdict and the /proc drill-down (who has the CPUs), and for every
/// tracing drill-down the exact sudo command.
#[test]
fn without_root_it_does_what_proc_allows_and_says_the_commands() {
    let Some(_) = learner("without_root_it_does_what_proc_allows_and_says_the_commands") else {
        return;
    };
    let _g = one_at_a_time();
    let mut burn = command("sudo")
        .args([
            "-n",
            "-u",
            common::LEARNER,
            "sh",
            "-c",
            "echo $$; exec \"$0\" --duration 30s",
        ])
        .arg(workload("cpu-burn"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(burn.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid = line.trim().to_string();
    // The learner's process, killed by root at the end (sudo would not
    // pass our SIGKILL on).
    struct Kill(String);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = command("kill").arg(&self.0).status();
        }
    }
    let _kill = Kill(pid.clone());
    let _kids = Kids(vec![burn]);

    let as_learner = |args: &[&str]| {
        command("sudo")
            .args(["-n", "-u", common::LEARNER])
            .arg(env!("CARGO_BIN_EXE_kdiag"))
            .args(args)
            .output()
            .unwrap()
    };
    let out = as_learner(&[
        "diagnose", "--json", "--why", "all", "-d", "1.5", "-p", &pid,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let verdict = v["diagnosis"]["verdict"].as_str().unwrap();
    assert!(["cpu", "sched"].contains(&verdict), "{}", v["diagnosis"]);
    let why = &v["why"];
    assert!(
        why["cpu"].is_null() && why["offcpu"].is_null() && why["storage"].is_null(),
        "{why}"
    );
    assert!(num(&why["competition"]["target_percent"]) > 0.0, "{why}");
    let skipped: Vec<&str> = why["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    for command in [
        format!("sudo kdiag profile -p {pid} -d 5"),
        format!("sudo kdiag offcpu -p {pid} -d 3"),
        format!("sudo kdiag iosnoop -p {pid} --summary 3"),
        format!("sudo kdiag exec-trace -p {pid}"),
    ] {
        assert!(
            skipped
                .iter()
                .any(|s| s.contains("needs root") && s.ends_with(&command)),
            "{command} not offered: {skipped:?}"
        );
    }

    // The text report, with the drill-down the verdict calls for.
    let out = as_learner(&["diagnose", "-d", "1.5", "-p", &pid]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let wanted = if text.starts_with("Verdict: cpu") {
        format!("Not run: CPU profile: needs root; run: sudo kdiag profile -p {pid} -d 5")
    } else {
        "CPU competition: it had ".to_string()
    };
    assert!(text.contains(&wanted), "{wanted:?} missing:\n{text}");
}
