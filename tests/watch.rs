//! `kdiag watch` against a real Prometheus: a CPU-bound workload in a cgroup
//! of the test's own, watched with `--cgroup` and served on `--listen`; the
//! exposition passes `promtool check metrics`, and Prometheus, scraping it
//! every second, answers PromQL queries with the workload's verdict and its
//! on-CPU rate. Every process the test starts is killed by a guard; every
//! wait has a deadline.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::watch::{
    Guard, OwnCg, log_lines, quiet_shell, turns_storage_bound, watch_cgroups, within,
};
use common::{kdiag, require_program, require_root, workload};
use serde_json::Value;

/// A v1 cpu cgroup of the test's own with the largest weight, so the
/// workload gets its CPU whatever else the machine runs (its verdict is
/// `cpu`, not `sched`); emptied and removed at the end.
fn own_cpu() -> OwnCg {
    let own = OwnCg::new("cpu");
    own.set("cpu.shares", "262144");
    own
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET `path` from `addr` (HTTP/1.0: the body is never chunked); the
/// status and the body.
fn get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |x| x.1).to_string();
    Ok((status, body))
}

fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The result vector of an instant PromQL query.
fn query(prom: &str, q: &str) -> Vec<Value> {
    let Ok((200, body)) = get(prom, &format!("/api/v1/query?query={}", encode(q))) else {
        return Vec::new();
    };
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

#[test]
fn prometheus_scrapes_the_verdict_and_thread_state_rates() {
    const TEST: &str = "prometheus_scrapes_the_verdict_and_thread_state_rates";
    if !require_root(TEST)
        || require_program(TEST, &["prometheus"], "prometheus").is_none()
        || require_program(TEST, &["promtool"], "prometheus").is_none()
    {
        return;
    }
    let own = own_cpu();
    let procs = own.dir.join("cgroup.procs");
    let burn = workload("cpu-burn");
    let script = format!(
        "echo $$ > {} && exec {} --threads 1 --duration 120",
        procs.display(),
        burn.display()
    );
    let _burn = Guard(Command::new("sh").args(["-c", &script]).spawn().unwrap());

    let mut watch = Guard(
        kdiag()
            .args([
                "watch",
                "--interval",
                "1",
                "--listen",
                "127.0.0.1:0",
                "--cgroup",
            ])
            .arg(&own.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // The address it bound, from its first line.
    let mut line = String::new();
    BufReader::new(watch.0.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("kdiag watch: serving http://")
        .and_then(|s| s.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_string();

    // The exposition is valid by Prometheus' own linter once a group is in it.
    let text = within(Duration::from_secs(20), "cpu-burn in /metrics", || {
        let (_, body) = get(&addr, "/metrics").ok()?;
        body.contains("kdiag_verdict{group=\"cpu-burn\"")
            .then_some(body)
    });
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("pid="), "no series per PID:\n{text}");

    // A real Prometheus scraping it every second.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: kdiag\n    static_configs:\n      - targets: ['{addr}']\n"
        ),
    )
    .unwrap();
    let prom = format!("127.0.0.1:{}", free_port());
    let _prometheus = Guard(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={prom}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    within(Duration::from_secs(30), "Prometheus ready", || {
        matches!(get(&prom, "/-/ready"), Ok((200, _))).then_some(())
    });
    let verdict = within(Duration::from_secs(60), "a verdict in Prometheus", || {
        let r = query(&prom, "kdiag_verdict{group=\"cpu-burn\"} == 1");
        r.first()?["metric"]["verdict"].as_str().map(String::from)
    });
    assert_eq!(verdict, "cpu");
    // One thread burning: about one on-CPU second per second, over 15 s of
    // scrapes (the counter steps once a scan: fewer points would alias).
    let on_cpu = "kdiag_thread_seconds_total{group=\"cpu-burn\",state=\"on_cpu\"}";
    within(Duration::from_secs(60), "15 s of on-CPU samples", || {
        let r = query(&prom, &format!("count_over_time({on_cpu}[15s])"));
        let n: f64 = r.first()?["value"][1].as_str()?.parse().ok()?;
        (n >= 13.0).then_some(())
    });
    let r = query(&prom, &format!("rate({on_cpu}[15s])"));
    let rate: f64 = r[0]["value"][1].as_str().unwrap().parse().unwrap();
    assert!((0.5..=1.2).contains(&rate), "on-CPU rate {rate}");
    let psi = query(&prom, "kdiag_pressure_cpu_waiting_seconds_total");
    assert_eq!(psi.len(), 1, "PSI exported once, without labels");

    // SIGTERM ends watch: the listener closes, exit code 128+15.
    // SAFETY: kill on the child's own pid.
    unsafe { libc::kill(watch.0.id() as i32, libc::SIGTERM) };
    let status = within(Duration::from_secs(10), "watch's exit", || {
        watch.0.try_wait().unwrap()
    });
    assert_eq!(status.code(), Some(143));
    assert!(TcpStream::connect(&addr).is_err(), "the listener closed");
}

#[test]
fn textfile_is_written_atomically_and_bad_input_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = kdiag()
        .args([
            "watch",
            "--interval",
            "1",
            "--duration",
            "2.5",
            "--textfile",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["kdiag.prom"], "only the file, no temporary left");
    let text = std::fs::read_to_string(dir.path().join("kdiag.prom")).unwrap();
    assert!(text.contains("# TYPE kdiag_verdict gauge"), "{text}");
    assert!(text.contains("kdiag_thread_seconds_total{group="), "{text}");

    // A file where the directory should be is refused, and left alone.
    let file = dir.path().join("kdiag.prom");
    let out = kdiag()
        .args(["watch", "--textfile"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("# TYPE kdiag_verdict gauge")
    );
    let out = kdiag()
        .args(["watch", "--interval", "0.5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// The flight recorder: a cgroup idle for 10 s, then storage-bound (dd's
/// 4 KiB O_DIRECT reads under a blkio limit of 100 read IOPS, so its waits
/// for storage dominate whatever else loads the machine; the cgroup's large
/// CPU weight keeps it from waiting for a CPU). Watch, grouping by cgroup,
/// sees the group turn `io-limit` (its blkio cgroup read as diagnose reads
/// it); after 3 s of it, it keeps one record and its HTML report, taken in
/// the bad phase (the process is dd by then, not the shell it was), whose
/// diagnosis is the same (`io-limit`, thread states alone: io), within the
/// size bound; the metric counts it; replay reads it.
#[test]
fn a_group_turned_storage_bound_leaves_a_flight_record_of_the_bad_phase() {
    const TEST: &str = "a_group_turned_storage_bound_leaves_a_flight_record_of_the_bad_phase";
    if !require_root(TEST) {
        return;
    }
    let cpu = OwnCg::new("cpu");
    let (shell, _blkio) = turns_storage_bound(&cpu, "watch-flight-direct-read", 10);
    let pid = shell.0.id() as i32;
    let flights = tempfile::tempdir().unwrap();
    let textfile = tempfile::tempdir().unwrap();
    const MAX_BYTES: u64 = 8 << 20;
    let mut watch = Guard(
        watch_cgroups(&cpu.dir)
            .arg("--flight-dir")
            .arg(flights.path())
            .args([
                "--record-after",
                "3",
                "--flight-max-size",
                "8M",
                "--textfile",
            ])
            .arg(textfile.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let rx = log_lines(&mut watch);
    let mut log = Vec::new();
    let recorded = within(Duration::from_secs(90), "a flight record", || {
        log.extend(rx.try_iter());
        log.iter()
            .find(|l| l.starts_with("kdiag watch: flight record of "))
            .cloned()
    });
    // The group's name: its v2 cgroup where it is not the root, else its
    // cpu cgroup (ours, here).
    let group = kdiag::sys::procfs::pressure::cgroup_of(
        &std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap(),
    );
    assert!(
        recorded.starts_with(&format!(
            "kdiag watch: flight record of {group} (io-limit; diagnose of PID {pid} says io-limit): "
        )),
        "{recorded}\n{log:#?}"
    );
    // Counted, by the group and watch's verdict.
    within(Duration::from_secs(10), "the flight count", || {
        let text = std::fs::read_to_string(textfile.path().join("kdiag.prom")).ok()?;
        text.contains(&format!(
            "kdiag_flight_records_total{{group=\"{group}\",verdict=\"io-limit\"}} 1\n"
        ))
        .then_some(())
    });
    // SIGTERM ends watch; nothing temporary is left.
    // SAFETY: kill on the child's own pid.
    unsafe { libc::kill(watch.0.id() as i32, libc::SIGTERM) };
    let status = within(Duration::from_secs(20), "watch's exit", || {
        watch.0.try_wait().unwrap()
    });
    assert_eq!(status.code(), Some(143));

    let mut names: Vec<String> = std::fs::read_dir(flights.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let stem = format!(
        "{}-io-limit",
        group.trim_start_matches('/').replace('/', "_")
    );
    assert!(
        names.len() == 3
            && names[0].starts_with("flight-")
            && names[0].ends_with(&format!("{stem}.html"))
            && names[1].ends_with(&format!("{stem}.jsonl"))
            && names[2].ends_with(&format!("{stem}.pprof")),
        "one record, its report and its profile: {names:?}"
    );
    let bytes: u64 = names
        .iter()
        .map(|n| std::fs::metadata(flights.path().join(n)).unwrap().len())
        .sum();
    assert!(bytes <= MAX_BYTES, "{bytes} bytes");
    let record = flights.path().join(&names[1]);
    let text = std::fs::read_to_string(&record).unwrap();
    let line = |kind: &str| -> Value {
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} line in {text}"))["data"]
            .clone()
    };
    let (o, d) = (line("observation"), line("diagnosis"));
    assert_eq!(o["pid"], pid, "the carrier");
    assert_eq!(o["comm"], "dd", "taken in the bad phase: {o}");
    assert_eq!(d["verdict"], "io-limit", "{d:#}");
    assert!(
        common::evidence_text(&d)
            .iter()
            .any(|e| e.contains("Thread states alone: io")),
        "{d:#}"
    );
    // The off-CPU profile the io verdict called for, as pprof: the
    // record's flame graph stacks, microseconds blocked.
    let p = common::profile_files::Pprof::read(&flights.path().join(&names[2]));
    assert_eq!(p.sample_types[0], ("off-cpu".into(), "microseconds".into()));
    let flame = &line("why")["offcpu_flame"];
    let folded: u64 = flame["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            l.as_str()
                .unwrap()
                .rsplit_once(' ')
                .unwrap()
                .1
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    let in_pprof: u64 = p.stacks().iter().map(|s| s.1).sum();
    assert!(
        folded > 0 && in_pprof == folded,
        "{in_pprof} µs in pprof, {folded} in the record"
    );
    assert!(
        recorded.ends_with(&format!(
            ", its profile {}",
            flights.path().join(&names[2]).display()
        )),
        "{recorded}"
    );
    let html = std::fs::read_to_string(flights.path().join(&names[0])).unwrap();
    assert!(
        html.starts_with("<!DOCTYPE html>"),
        "{}",
        &html[..100.min(html.len())]
    );
    let replay = kdiag()
        .args(["diagnose", "--replay"])
        .arg(&record)
        .output()
        .unwrap();
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    drop(shell);
}

/// Watch's resident memory (VmRSS), bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib << 10
}

/// The group label values of a textfile's `kdiag_verdict` series.
fn groups_in(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("kdiag_verdict{group=\""))
        .filter_map(|l| l.split_once('"').map(|x| x.0.to_string()))
        .collect()
}

/// `--config FILE` and SIGHUP: watch reads its options from the file and,
/// on SIGHUP, again (here moving its textfile and grouping by cgroup); a
/// file that no longer parses leaves it running as it was; SIGTERM still
/// ends it.
#[test]
fn sighup_reloads_the_configuration_and_a_bad_one_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    let config = dir.path().join("watch.toml");
    let write = |text: &str| std::fs::write(&config, text).unwrap();
    write(&format!(
        "interval = 1\ntop = 3\ntextfile = \"{}\"\n",
        first.display()
    ));
    let mut watch = Guard(
        kdiag()
            .args(["watch", "--config"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let rx = log_lines(&mut watch);
    let prom = |d: &Path| std::fs::read_to_string(d.join("kdiag.prom")).ok();
    let text = within(Duration::from_secs(20), "the first textfile", || {
        prom(&first).filter(|t| !groups_in(t).is_empty())
    });
    assert!(groups_in(&text).len() <= 3, "top = 3:\n{text}");
    let hup = |w: &Guard| {
        // SAFETY: kill on the child's own pid.
        unsafe { libc::kill(w.0.id() as i32, libc::SIGHUP) };
    };
    let mut log = Vec::new();
    let mut wait_log = |what: &str| {
        within(Duration::from_secs(30), what, || {
            log.extend(rx.try_iter());
            log.iter().any(|l| l.contains(what)).then_some(())
        })
    };

    write(&format!(
        "interval = 1\ngroup-by = \"cgroup\"\ntextfile = \"{}\"\n",
        second.display()
    ));
    hup(&watch);
    wait_log("kdiag watch: reloaded ");
    let text = within(Duration::from_secs(20), "the second textfile", || {
        prom(&second).filter(|t| !groups_in(t).is_empty())
    });
    assert!(
        groups_in(&text).iter().all(|g| g.starts_with('/')),
        "grouped by cgroup:\n{text}"
    );
    assert!(
        watch.0.try_wait().unwrap().is_none(),
        "SIGHUP did not end it"
    );

    write("interval = 0.5\n");
    hup(&watch);
    wait_log("going on as before");
    let before = std::fs::metadata(second.join("kdiag.prom"))
        .unwrap()
        .modified()
        .unwrap();
    within(
        Duration::from_secs(20),
        "the second textfile written again",
        || {
            let now = std::fs::metadata(second.join("kdiag.prom"))
                .ok()?
                .modified()
                .ok()?;
            (now > before).then_some(())
        },
    );

    // SAFETY: kill on the child's own pid.
    unsafe { libc::kill(watch.0.id() as i32, libc::SIGTERM) };
    let status = within(Duration::from_secs(10), "watch's exit", || {
        watch.0.try_wait().unwrap()
    });
    assert_eq!(status.code(), Some(143));
}

/// A churn of short-lived processes, each of a name of its own (1,000 at
/// least over the 20 s measured), watched with a 1 s interval: watch's series
/// stay within --top, and its memory stays flat once its tables have
/// grown to the churn's size (groups not seen for 10 scans are forgotten).
#[test]
fn a_churn_of_short_lived_processes_keeps_memory_and_series_bounded() {
    const TEST: &str = "a_churn_of_short_lived_processes_keeps_memory_and_series_bounded";
    if !require_root(TEST) {
        return;
    }
    let own = OwnCg::new("cpu");
    let procs = own.dir.join("cgroup.procs");
    let counted = tempfile::NamedTempFile::new().unwrap();
    // Batches of 50 processes living 0.2 s, each naming itself, until
    // the test ends; the count so far in a file. The name is written
    // without a newline (comm would keep it) and the shell waits for its
    // sleep rather than exec it (exec renames the process "sleep").
    let script = format!(
        "echo $$ > {} && i=0; while :; do \
         sh -c \"printf churn-$i > /proc/self/comm; sleep 0.2\" & \
         i=$((i+1)); [ $((i % 50)) -eq 0 ] && wait && echo $i > {}; done",
        procs.display(),
        counted.path().display()
    );
    let churn = quiet_shell(&script);
    let dir = tempfile::tempdir().unwrap();
    let watch = Guard(
        kdiag()
            .args(["watch", "--interval", "1", "--top", "5", "--cgroup"])
            .arg(&own.dir)
            .arg("--textfile")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = watch.0.id();
    // Warmed up: 10 scans, as long as a forgotten group is remembered.
    std::thread::sleep(Duration::from_secs(12));
    let warm = rss(pid);
    let mut most = warm;
    let mut series = 0;
    let count = || -> u64 {
        std::fs::read_to_string(counted.path())
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0)
    };
    let (started, end) = (count(), Instant::now() + Duration::from_secs(20));
    while Instant::now() < end {
        std::thread::sleep(Duration::from_secs(1));
        most = most.max(rss(pid));
        let text = std::fs::read_to_string(dir.path().join("kdiag.prom")).unwrap_or_default();
        let groups = groups_in(&text);
        assert!(groups.len() <= 5, "--top 5:\n{text}");
        series = series.max(text.lines().filter(|l| !l.starts_with('#')).count());
    }
    let churned = count() - started;
    assert!(churned >= 1000, "only {churned} processes in 20 s");
    drop(churn);
    // Five groups' series and the machine-wide ones: far fewer than the
    // processes seen.
    assert!(series <= 5 * 14 + 20, "{series} series");
    let grew = most.saturating_sub(warm);
    eprintln!(
        "{churned} processes in 20 s; watch's RSS {} KiB warm, {} KiB at most; {series} series",
        warm >> 10,
        most >> 10
    );
    assert!(
        grew <= 1 << 20,
        "watch's memory grew {} KiB over 20 s of churn (from {} KiB)",
        grew >> 10,
        warm >> 10
    );
}

/// The group and verdict of a textfile's one group (watch --pid).
fn verdict(text: &str) -> Option<(String, String)> {
    let l = text
        .lines()
        .find(|l| l.starts_with("kdiag_verdict{") && l.ends_with(" 1"))?;
    let label = |name: &str| {
        let v = l.split_once(&format!("{name}=\""))?.1;
        Some(v.split_once('"')?.0.to_string())
    };
    Some((label("group")?, label("verdict")?))
}

/// `kdiag watch --interval 1 --pid PID --textfile DIR`, killed at the end.
fn watch_pid(pid: u32, dir: &Path) -> Guard {
    Guard(
        kdiag()
            .args(["watch", "--interval", "1", "--pid", &pid.to_string()])
            .arg("--textfile")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Watch's verdict of `pid` alone in it, first and 3 s later, beside
/// diagnose's of it in the same minute.
fn watch_and_diagnose(pid: u32) -> (String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let _watch = watch_pid(pid, dir.path());
    let read = || verdict(&std::fs::read_to_string(dir.path().join("kdiag.prom")).ok()?);
    let (_, first) = within(Duration::from_secs(20), "a verdict", read);
    let v = common::diagnose_json(&["-p", &pid.to_string(), "-d", "3", "--why", "none"]);
    let (_, later) = read().unwrap();
    let diagnose = v["diagnosis"]["verdict"].as_str().unwrap().to_string();
    (first, later, diagnose)
}

/// watch reads a group's limits as diagnose does, in every hierarchy and
/// not only the group's own cgroup: dd's 4 KiB O_DIRECT reads in a blkio
/// cgroup of their own limiting reads to 100 IOPS (its cpu cgroup the
/// root, so watch groups it by name) are `io-limit` in watch, from its
/// first interval judged, as in diagnose.
#[test]
fn a_reader_under_a_blkio_limit_is_io_limit_in_watch_as_in_diagnose() {
    if !require_root("a_reader_under_a_blkio_limit_is_io_limit_in_watch_as_in_diagnose") {
        return;
    }
    let (_cg, dd) = common::own_cgroup::iops_limited_reader("watch-limit-direct-read");
    let dd = Guard(dd);
    let verdicts = watch_and_diagnose(dd.0.id());
    assert_eq!(
        verdicts,
        ("io-limit".into(), "io-limit".into(), "io-limit".into()),
        "watch first, watch later, diagnose"
    );
}

/// The same for a memory limit: a file of 128 MiB read again and again
/// through mmap in a memory cgroup of 48 MiB (its pages evicted and read
/// back: failcnt and refaults grow) is `memory-limit` in watch and in
/// diagnose, not the storage waits it shows as.
#[test]
fn a_reader_under_a_memory_limit_is_memory_limit_in_watch_as_in_diagnose() {
    if !require_root("a_reader_under_a_memory_limit_is_memory_limit_in_watch_as_in_diagnose") {
        return;
    }
    let file = Path::new(env!("CARGO_TARGET_TMPDIR")).join("watch-limits-mmap-file");
    if std::fs::metadata(&file).map_or(true, |m| m.len() != 128 << 20) {
        // Written back first: dirty pages stay charged to the writer's
        // cgroup (see diagnose_limits' test of the same).
        let ok = common::command("dd")
            .args(["if=/dev/zero", "bs=1M", "count=128", "conv=fsync"])
            .arg(format!("of={}", file.display()))
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(ok.success());
    }
    let cg = OwnCg::new("memory");
    cg.set("memory.limit_in_bytes", &(48u64 << 20).to_string());
    let reader = Guard(cg.spawn(&format!(
        "exec {} {} keep",
        common::c_fixture("mmap_read").display(),
        file.display()
    )));
    let verdicts = watch_and_diagnose(reader.0.id());
    assert_eq!(
        verdicts,
        (
            "memory-limit".into(),
            "memory-limit".into(),
            "memory-limit".into()
        ),
        "watch first, watch later, diagnose"
    );
}

/// Cgroup throttling per group: cpu-burn in a cgroup of the test's own
/// under a CPU quota of a fifth of a CPU, watched grouping by cgroup: the
/// group's throttled seconds and periods are exported and grow, as the
/// kernel's cpu.stat counts them.
#[test]
fn a_group_under_a_cpu_quota_exports_its_throttling() {
    if !require_root("a_group_under_a_cpu_quota_exports_its_throttling") {
        return;
    }
    let own = OwnCg::new("cpu");
    own.set("cpu.cfs_period_us", "100000");
    own.set("cpu.cfs_quota_us", "20000");
    let script = format!(
        "echo $$ > {} && exec {} --threads 1 --duration 60",
        own.dir.join("cgroup.procs").display(),
        workload("cpu-burn").display()
    );
    let _burn = Guard(Command::new("sh").args(["-c", &script]).spawn().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let _watch = Guard(
        watch_cgroups(&own.dir)
            .arg("--textfile")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let series = |name: &str, text: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}{{group=\"/kdiagtest-cg-")))?
            .rsplit(' ')
            .next()?
            .parse()
            .ok()
    };
    let read = || {
        let text = std::fs::read_to_string(dir.path().join("kdiag.prom")).ok()?;
        Some((
            series("kdiag_cgroup_throttled_seconds_total", &text)?,
            series("kdiag_cgroup_throttled_periods_total", &text)?,
        ))
    };
    let first = within(Duration::from_secs(20), "throttling exported", read);
    let later = within(Duration::from_secs(20), "throttling grown", || {
        read().filter(|l| l.0 > first.0 && l.1 > first.1)
    });
    assert!(later.1 >= 1.0, "{later:?}");
}

/// watch judges a group by diagnose's rules, limits included: a busy
/// shell loop in a cgroup named as a systemd service
/// (`kdiagtest-quota-PID.service`) under a tenth of a CPU, watched with
/// watch's default grouping, is one group named by its cgroup (not "sh",
/// among every other shell), and its verdict is `cpu-quota`, as diagnose
/// says of it, not `sched`.
#[test]
fn a_unit_throttled_by_its_quota_is_one_group_and_cpu_quota() {
    if !require_root("a_unit_throttled_by_its_quota_is_one_group_and_cpu_quota") {
        return;
    }
    let own = OwnCg::named(
        "cpu",
        &format!("kdiagtest-quota-{}.service", std::process::id()),
    );
    own.set("cpu.cfs_period_us", "100000");
    own.set("cpu.cfs_quota_us", "10000");
    let script = format!(
        "echo $$ > {} && while :; do :; done",
        own.dir.join("cgroup.procs").display()
    );
    let shell = quiet_shell(&script);
    let pid = shell.0.id() as i32;
    within(Duration::from_secs(5), "the shell in its cgroup", || {
        own.pids().contains(&pid).then_some(())
    });
    let dir = tempfile::tempdir().unwrap();
    let _watch = watch_pid(pid as u32, dir.path());
    // Throttled from its first period: the first intervals judged already
    // say so, and every one after.
    let (group, first) = within(Duration::from_secs(20), "a verdict", || {
        verdict(&std::fs::read_to_string(dir.path().join("kdiag.prom")).ok()?)
    });
    assert_eq!(group, own.path, "grouped by its unit's cgroup, not by name");
    std::thread::sleep(Duration::from_secs(3));
    let text = std::fs::read_to_string(dir.path().join("kdiag.prom")).unwrap();
    let (_, later) = verdict(&text).unwrap();
    assert_eq!(
        (first.as_str(), later.as_str()),
        ("cpu-quota", "cpu-quota"),
        "{text}"
    );
    drop(shell);
}
