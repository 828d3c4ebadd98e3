//! `kdiag watch --otlp` against an OTLP/HTTP receiver decoding each request
//! with opentelemetry-proto's real message types (tests/programs/
//! otlp_receiver.py, which refuses a field the types do not know): a
//! cgroup named as Docker names its containers' turns from idle to
//! storage-bound, and the receiver gets the verdict change as a log record
//! and the metrics with their OpenTelemetry names, units and attributes
//! (`container.id` from the cgroup's name).

mod common;

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use common::watch::{
    Guard, OwnCg, log_lines, receiver, turns_storage_bound, watch_cgroups, within,
};
use common::{kdiag, require_root};
use serde_json::Value;

/// A list of OTLP `KeyValue`s as key → value (strings; ints as text).
fn attrs(list: &Value) -> HashMap<String, String> {
    let empty = Vec::new();
    list.as_array()
        .unwrap_or(&empty)
        .iter()
        .map(|kv| {
            let v = &kv["value"];
            let text = v["string_value"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v["int_value"].to_string());
            (kv["key"].as_str().unwrap().to_string(), text)
        })
        .collect()
}

/// The log records of a /v1/logs request.
fn log_records(req: &Value) -> Vec<Value> {
    req["request"]["resource_logs"][0]["scope_logs"][0]["log_records"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The metrics of a /v1/metrics request, by name.
fn metrics(req: &Value) -> HashMap<String, Value> {
    req["request"]["resource_metrics"][0]["scope_metrics"][0]["metrics"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|m| (m["name"].as_str().unwrap().to_string(), m))
        .collect()
}

/// A metric's data points (a sum's or a gauge's).
fn points(m: &Value) -> Vec<Value> {
    let data = if m["sum"].is_object() {
        &m["sum"]
    } else {
        &m["gauge"]
    };
    data["data_points"].as_array().cloned().unwrap_or_default()
}

#[test]
fn an_otlp_receiver_gets_the_verdict_change_and_the_metrics_of_a_container() {
    const TEST: &str = "an_otlp_receiver_gets_the_verdict_change_and_the_metrics_of_a_container";
    if !require_root(TEST) {
        return;
    }
    let Some((_receiver, port, requests)) = receiver(TEST, "otlp_receiver.py", None) else {
        return;
    };
    // A cpu cgroup named as Docker's systemd driver names a container's,
    // with the largest weight (the workload's waits are for storage, not
    // a CPU); dd's 4 KiB O_DIRECT reads under 100 read IOPS after 8 s of
    // sleep: idle, then io-limit (the blkio cgroup read as diagnose reads it).
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let id = format!("{:032x}{:032x}", std::process::id(), nanos as u64);
    let cpu = OwnCg::named("cpu", &format!("docker-{id}.scope"));
    let (shell, _blkio) = turns_storage_bound(&cpu, "watch-otlp-direct-read", 8);
    let group = format!("/docker-{id}.scope");
    let mut watch = Guard(
        watch_cgroups(&cpu.dir)
            .args(["--otlp", &format!("http://127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let log = log_lines(&mut watch);

    // The turn to io-limit, a log record.
    let mut seen: Vec<Value> = Vec::new();
    let change = within(
        Duration::from_secs(90),
        "a verdict change to io-limit",
        || {
            seen.extend(requests.try_iter());
            seen.iter()
                .filter(|r| r["path"] == "/v1/logs")
                .flat_map(log_records)
                .find(|r| {
                    let a = attrs(&r["attributes"]);
                    a.get("kdiag.group") == Some(&group)
                        && a.get("kdiag.verdict").map(String::as_str) == Some("io-limit")
                })
        },
    );
    let errors: Vec<_> = seen.iter().filter(|r| r.get("error").is_some()).collect();
    assert!(errors.is_empty(), "the receiver refused: {errors:#?}");
    let a = attrs(&change["attributes"]);
    assert_eq!(change["event_name"], "kdiag.verdict.change", "{change:#}");
    assert_eq!(
        change["severity_number"], "SEVERITY_NUMBER_WARN",
        "{change:#}"
    );
    assert!(
        a.get("kdiag.verdict.previous")
            .is_some_and(|p| p != "io-limit"),
        "a change from the sleep's verdict: {change:#}"
    );
    assert_eq!(a.get("container.id"), Some(&id[..12].to_string()), "{a:?}");
    assert_eq!(
        a.get("kdiag.runs_as").map(String::as_str),
        Some("Docker container")
    );
    assert!(
        change["body"]["string_value"]
            .as_str()
            .is_some_and(|b| b.starts_with(&format!("{group} is io-limit (was "))),
        "{change:#}"
    );

    // The metrics of a scan after it: names, units, kinds, attributes.
    let req = within(
        Duration::from_secs(20),
        "the metrics of the io-limit phase",
        || {
            seen.extend(requests.try_iter());
            seen.iter()
                .rev()
                .filter(|r| r["path"] == "/v1/metrics")
                .find(|r| {
                    metrics(r).get("kdiag.verdict").is_some_and(|m| {
                        points(m).iter().any(|p| {
                            let a = attrs(&p["attributes"]);
                            a.get("kdiag.group") == Some(&group)
                                && a.get("kdiag.verdict").map(String::as_str) == Some("io-limit")
                        })
                    })
                })
                .cloned()
        },
    );
    let resource = attrs(&req["request"]["resource_metrics"][0]["resource"]["attributes"]);
    assert_eq!(
        resource.get("service.name").map(String::as_str),
        Some("kdiag")
    );
    assert!(
        resource.get("host.name").is_some_and(|h| !h.is_empty()),
        "{resource:?}"
    );
    let m = metrics(&req);
    for (name, unit, counter) in [
        ("kdiag.thread.time", "s", true),
        ("kdiag.verdict", "1", false),
        ("kdiag.major_faults", "{fault}", true),
        ("kdiag.storage.io", "By", true),
        ("kdiag.group.processes", "{process}", false),
        ("kdiag.group.threads", "{thread}", false),
        ("kdiag.watch.cpu.time", "s", true),
        ("kdiag.watch.memory.usage", "By", false),
    ] {
        let metric = m
            .get(name)
            .unwrap_or_else(|| panic!("no {name}: {:?}", m.keys()));
        assert_eq!(metric["unit"], unit, "{name}");
        if counter {
            assert_eq!(metric["sum"]["is_monotonic"], true, "{name}");
            assert_eq!(
                metric["sum"]["aggregation_temporality"], "AGGREGATION_TEMPORALITY_CUMULATIVE",
                "{name}"
            );
        } else {
            assert!(metric["gauge"].is_object(), "{name} is a gauge: {metric:#}");
        }
    }
    let ours = |name: &str, key: &str, value: &str| -> Value {
        points(&m[name])
            .into_iter()
            .find(|p| {
                let a = attrs(&p["attributes"]);
                a.get("kdiag.group") == Some(&group)
                    && a.get(key).map(String::as_str) == Some(value)
            })
            .unwrap_or_else(|| panic!("no {name} with {key}={value} for {group}: {:#}", m[name]))
    };
    let storage_s = ours("kdiag.thread.time", "kdiag.thread.state", "storage");
    assert!(
        storage_s["as_double"].as_f64().unwrap() > 0.0,
        "{storage_s:#}"
    );
    assert_eq!(
        attrs(&storage_s["attributes"]).get("container.id"),
        Some(&id[..12].to_string())
    );
    let read = ours("kdiag.storage.io", "disk.io.direction", "read");
    let bytes: u64 = read["as_int"].as_str().unwrap().parse().unwrap();
    assert!(bytes > 0, "{read:#}");

    // SIGTERM ends watch as ever.
    // SAFETY: kill on the child's own pid.
    unsafe { libc::kill(watch.0.id() as i32, libc::SIGTERM) };
    let status = within(Duration::from_secs(20), "watch's exit", || {
        watch.0.try_wait().unwrap()
    });
    let log: Vec<String> = log.try_iter().collect();
    assert_eq!(status.code(), Some(143), "{log:#?}");
    assert!(
        !log.iter().any(|l| l.contains("OTLP export")),
        "every export went through: {log:#?}"
    );
    drop(shell);
}

#[test]
fn an_otlp_url_that_is_not_plain_http_is_a_usage_error() {
    for (url, says) in [
        ("https://collector:4318", "without TLS"),
        ("collector:4318", "http://127.0.0.1:4318"),
        ("http://collector:0x", "not a port"),
    ] {
        let out = kdiag()
            .args(["watch", "--otlp", url, "--duration", "1"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{url}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{url}: {err}");
    }
}
