//! `kdiag watch` as a service: the systemd unit the .deb ships passes
//! `systemd-analyze verify` (with the unit's ExecStart pointed at the
//! binary under test, the only line changed), and watch run as an
//! unprivileged user with exactly the unit's capabilities reads what it
//! needs of another user's process (its storage bytes, from /proc/PID/io),
//! which the same user without them cannot: the control.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::watch::Guard;
use common::{require_program, require_root, workload};
use serde_json::Value;

const UNIT: &str = include_str!("../packaging/kdiag-watch.service");

/// The unit's value of `key` (the first line setting it).
fn unit_value(key: &str) -> &'static str {
    UNIT.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("the unit sets no {key}"))
}

#[test]
fn the_unit_verifies_and_the_deb_ships_it() {
    const TEST: &str = "the_unit_verifies_and_the_deb_ships_it";
    let cargo = include_str!("../Cargo.toml");
    assert!(
        cargo.contains(r#"["packaging/kdiag-watch.service", "lib/systemd/system/", "644"]"#)
            && cargo.contains(r#"["packaging/watch.toml", "etc/kdiag/", "644"]"#),
        "[package.metadata.deb] assets ship the unit and its configuration"
    );
    assert_eq!(
        unit_value("ExecStart"),
        "/usr/bin/kdiag watch --config /etc/kdiag/watch.toml"
    );
    assert_eq!(unit_value("Restart"), "on-failure");
    assert_eq!(unit_value("DynamicUser"), "yes");
    let caps = "CAP_PERFMON CAP_BPF CAP_SYS_PTRACE CAP_DAC_READ_SEARCH";
    assert_eq!(unit_value("AmbientCapabilities"), caps);
    assert_eq!(unit_value("CapabilityBoundingSet"), caps);
    if require_program(TEST, &["systemd-analyze"], "systemd").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("kdiag-watch.service");
    std::fs::write(
        &unit,
        UNIT.replace(
            "/usr/bin/kdiag ",
            &format!("{} ", env!("CARGO_BIN_EXE_kdiag")),
        ),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Unknown keys are only warned about: any word from it is a defect.
    assert!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify: {said}"
    );
}

/// kdiag run as `nobody` with `caps` (setpriv's list), or none.
fn kdiag_as_nobody(caps: Option<&str>) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
    if let Some(c) = caps {
        cmd.arg(format!("--inh-caps={c}"))
            .arg(format!("--ambient-caps={c}"));
    }
    cmd.arg("--").arg(env!("CARGO_BIN_EXE_kdiag"));
    cmd
}

/// `kdiag_storage_written_bytes_total` of group `io-app` in watch's
/// textfile after 4 s, watch run as `nobody` with `caps` (setpriv's list).
fn storage_bytes_as_nobody(pid: u32, caps: Option<&str>) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o777);
    std::fs::set_permissions(dir.path(), mode).unwrap();
    let out = kdiag_as_nobody(caps)
        .args(["watch", "--interval", "1", "--duration", "4", "--pid"])
        .arg(pid.to_string())
        .arg("--textfile")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "watch as nobody ({caps:?}): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.path().join("kdiag.prom")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("kdiag_storage_written_bytes_total{group=\"io-app\"} "))
        .unwrap_or_else(|| panic!("no io-app group ({caps:?}):\n{text}"))
        .parse()
        .unwrap()
}

#[test]
fn watch_runs_as_a_user_with_the_units_capabilities_and_no_root() {
    const TEST: &str = "watch_runs_as_a_user_with_the_units_capabilities_and_no_root";
    if !require_root(TEST) || require_program(TEST, &["setpriv"], "util-linux").is_none() {
        return;
    }
    let caps = unit_caps();
    // root's io-app, writing 1 MiB with O_SYNC every 50 ms on a real disk.
    let scratch: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR")).join("watch-service-io");
    std::fs::create_dir_all(&scratch).unwrap();
    let app = Guard(
        Command::new(workload("io-app"))
            .args([
                "--size",
                "1M",
                "--pause",
                "50ms",
                "--duration",
                "60",
                "--scratch",
            ])
            .arg(&scratch)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let with = storage_bytes_as_nobody(app.0.id(), Some(&caps));
    assert!(
        with > 0,
        "with {caps}: no storage bytes read from /proc/PID/io"
    );
    let without = storage_bytes_as_nobody(app.0.id(), None);
    assert_eq!(without, 0, "without capabilities /proc/PID/io is closed");
}

/// The unit's ambient capabilities in setpriv's words (+sys_ptrace, ...).
fn unit_caps() -> String {
    let caps: Vec<String> = unit_value("AmbientCapabilities")
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    caps.join(",")
}

/// The flight recorder's drill-downs under the service: diagnose run as
/// `nobody` with the unit's capabilities (as the recorder runs it, on a
/// process of root's) profiles it on and off the CPU, which needs no more
/// than CAP_PERFMON and CAP_BPF; without them both are skipped as needing
/// root.
#[test]
fn drill_downs_run_as_a_user_with_the_units_capabilities() {
    const TEST: &str = "drill_downs_run_as_a_user_with_the_units_capabilities";
    if !require_root(TEST) || require_program(TEST, &["setpriv"], "util-linux").is_none() {
        return;
    }
    let burn = Guard(
        Command::new(workload("cpu-burn"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = burn.0.id().to_string();
    let diagnose = |caps: Option<&str>| -> Value {
        let out = kdiag_as_nobody(caps)
            .args([
                "diagnose", "--json", "--why", "all", "-d", "1.5", "-p", &pid,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "diagnose as nobody ({caps:?}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["why"].clone()
    };
    let why = diagnose(Some(&unit_caps()));
    let skipped = why["skipped"].to_string();
    assert!(!why["cpu"].is_null(), "no CPU profile: {skipped}");
    assert!(!why["offcpu"].is_null(), "no off-CPU profile: {skipped}");
    assert!(!skipped.contains("profile: needs root"), "{skipped}");
    let without = diagnose(None);
    assert!(
        without["cpu"].is_null() && without["offcpu"].is_null(),
        "without capabilities: {without}"
    );
    assert!(
        without["skipped"]
            .to_string()
            .contains("CPU profile: needs root"),
        "{without}"
    );
}

/// The metric names an expression (or a file of them) uses.
fn metric_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if (word.starts_with("kdiag_") || word.starts_with("process_"))
            && !word.starts_with("kdiag_thread_states")
            && !names.iter().any(|n| n == word)
        {
            names.push(word.to_string());
        }
    }
    names
}

/// The fleet set-up in the repository: the alert rules pass `promtool check
/// rules`, so does every query of the Grafana dashboard (as a recording
/// rule, its variables given values), and every metric either names is one
/// watch exports (a `# TYPE` line of a real exposition).
#[test]
fn the_fleet_rules_and_dashboard_check_and_use_only_watchs_metrics() {
    const TEST: &str = "the_fleet_rules_and_dashboard_check_and_use_only_watchs_metrics";
    let rules = include_str!("../packaging/prometheus-rules.yml");
    let dashboard: serde_json::Value =
        serde_json::from_str(include_str!("../packaging/grafana-dashboard.json")).unwrap();
    let mut exprs = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            exprs.push(t["expr"].as_str().unwrap().to_string());
        }
    }
    assert!(exprs.len() >= 9, "{exprs:?}");

    // A real exposition's metrics.
    let dir = tempfile::tempdir().unwrap();
    let flights = tempfile::tempdir().unwrap();
    let out = common::kdiag()
        .args([
            "watch",
            "--interval",
            "1",
            "--duration",
            "2.5",
            "--textfile",
        ])
        .arg(dir.path())
        .arg("--flight-dir")
        .arg(flights.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.path().join("kdiag.prom")).unwrap();
    let mut used = metric_names(rules);
    for e in &exprs {
        used.extend(metric_names(e));
    }
    for name in &used {
        assert!(
            text.contains(&format!("# TYPE {name} ")),
            "{name} is not a metric watch exports:\n{text}"
        );
    }

    if require_program(TEST, &["promtool"], "prometheus").is_none() {
        return;
    }
    let check = |file: &Path| {
        let out = Command::new("promtool")
            .args(["check", "rules"])
            .arg(file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool check rules {}: {}{}",
            file.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    check(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/packaging/prometheus-rules.yml"
    )));
    let mut as_rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, e) in exprs.iter().enumerate() {
        let e = e
            .replace("$__rate_interval", "5m")
            .replace("$instance", ".*")
            .replace("$group", ".*");
        as_rules += &format!(
            "      - record: dashboard:query{i}\n        expr: {}\n",
            serde_json::to_string(&e).unwrap()
        );
    }
    let file = dir.path().join("dashboard-rules.yml");
    std::fs::write(&file, as_rules).unwrap();
    check(&file);
}
