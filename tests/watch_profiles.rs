//! `kdiag watch --pyroscope` and `--otlp-profiles`: continuous CPU and
//! off-CPU profiles of what watch watches, received by a Pyroscope push
//! receiver that decodes push.proto and the pprof inside field by field
//! (tests/programs/pyroscope_receiver.py) and by an OTLP receiver decoding
//! with opentelemetry-proto's profiles types (otlp_receiver.py), both
//! refusing a field their definitions do not have. And a receiver that is
//! down for a minute: watch's memory stays flat, the profiles it could not
//! send are dropped and counted.

mod common;

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::watch::{Guard, OwnCg, log_lines, receiver, within};
use common::{c_fixture, kdiag, require_root};
use serde_json::Value;

/// The Pyroscope series received so far whose `__name__` is `name` and
/// whose `service_name` is `service`.
fn pyroscope_series<'a>(seen: &'a [Value], name: &str, service: &str) -> Vec<&'a Value> {
    seen.iter()
        .filter_map(|r| r["series"].as_array())
        .flatten()
        .filter(|s| s["labels"]["__name__"] == name && s["labels"]["service_name"] == service)
        .collect()
}

fn functions(series: &Value) -> Vec<String> {
    series["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["functions"].as_array().unwrap().clone())
        .map(|f| f.as_str().unwrap().to_string())
        .collect()
}

/// An OTLP profiles request's profiles, each with its resource's
/// attributes, its sample type and its function names (from the
/// dictionary: each sample's stack, its locations' lines' functions).
fn otlp_profiles(req: &Value) -> Vec<(HashMap<String, String>, String, Vec<String>)> {
    let r = &req["request"];
    let dict = &r["dictionary"];
    let table = |name: &str| dict[name].as_array().cloned().unwrap_or_default();
    let strings: Vec<String> = table("string_table")
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    let index = |v: &Value, key: &str| v[key].as_u64().unwrap_or(0) as usize;
    let (stacks, locations, fns) = (
        table("stack_table"),
        table("location_table"),
        table("function_table"),
    );
    let mut out = Vec::new();
    for rp in r["resource_profiles"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        let attrs: HashMap<String, String> = rp["resource"]["attributes"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|kv| {
                let v = kv["value"]["string_value"].as_str().unwrap_or("");
                (kv["key"].as_str().unwrap().to_string(), v.to_string())
            })
            .collect();
        for p in rp["scope_profiles"][0]["profiles"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let kind = strings[index(&p["sample_type"], "type_strindex")].clone();
            let mut names = Vec::new();
            for s in p["samples"].as_array().cloned().unwrap_or_default() {
                let stack = &stacks[index(&s, "stack_index")];
                for l in stack["location_indices"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                {
                    let loc = &locations[l.as_u64().unwrap() as usize];
                    for line in loc["lines"].as_array().cloned().unwrap_or_default() {
                        let f = &fns[index(&line, "function_index")];
                        names.push(strings[index(f, "name_strindex")].clone());
                    }
                }
            }
            out.push((attrs.clone(), kind, names));
        }
    }
    out
}

#[test]
fn a_busy_programs_functions_arrive_in_pyroscope_and_as_otlp_profiles_with_its_labels() {
    const TEST: &str =
        "a_busy_programs_functions_arrive_in_pyroscope_and_as_otlp_profiles_with_its_labels";
    if !require_root(TEST) {
        return;
    }
    let Some((_pyro, pyro_port, pyro_rx)) = receiver(TEST, "pyroscope_receiver.py", None) else {
        return;
    };
    let Some((_otel, otel_port, otel_rx)) = receiver(TEST, "otlp_receiver.py", None) else {
        return;
    };
    // The busy program in a cpu cgroup named as Docker's systemd driver
    // names a container's.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let id = format!("{:032x}{:032x}", std::process::id(), nanos as u64);
    let cg = OwnCg::named("cpu", &format!("docker-{id}.scope"));
    let busy = Guard(cg.spawn(&format!("exec {}", c_fixture("push_busy").display())));
    let pid = busy.0.id();
    let comm = within(Duration::from_secs(5), "the program's exec", || {
        let c = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        c.starts_with("program-").then(|| c.trim_end().to_string())
    });
    let mut watch = Guard(
        kdiag()
            .args(["watch", "--cgroup"])
            .arg(&cg.dir)
            .args(["--pyroscope", &format!("http://127.0.0.1:{pyro_port}")])
            .args(["--otlp-profiles", &format!("http://127.0.0.1:{otel_port}")])
            .args(["--push-interval", "2"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let log = log_lines(&mut watch);

    // Pyroscope: the CPU series names push_spin, the off-CPU one the
    // kernel's nanosleep; both carry the container's labels.
    let mut pyro: Vec<Value> = Vec::new();
    let cpu = within(Duration::from_secs(60), "push_spin in Pyroscope", || {
        pyro.extend(pyro_rx.try_iter());
        pyroscope_series(&pyro, "process_cpu", &comm)
            .into_iter()
            .find(|s| functions(s).iter().any(|f| f == "push_spin"))
            .cloned()
    });
    let off = within(
        Duration::from_secs(30),
        "nanosleep off-CPU in Pyroscope",
        || {
            pyro.extend(pyro_rx.try_iter());
            pyroscope_series(&pyro, "offcpu", &comm)
                .into_iter()
                .find(|s| functions(s).iter().any(|f| f.contains("nanosleep")))
                .cloned()
        },
    );
    let errors: Vec<_> = pyro.iter().filter(|r| r.get("error").is_some()).collect();
    assert!(
        errors.is_empty(),
        "Pyroscope's receiver refused: {errors:#?}"
    );
    for s in [&cpu, &off] {
        let l = &s["labels"];
        assert_eq!(l["container_id"], id[..12], "{s:#}");
        assert_eq!(l["cgroup"], cg.path, "{s:#}");
    }
    assert_eq!(
        cpu["profiles"][0]["sample_types"],
        serde_json::json!(["samples/count", "cpu/nanoseconds"])
    );
    assert_eq!(
        off["profiles"][0]["sample_types"],
        serde_json::json!(["blocks/count", "off-cpu/nanoseconds"])
    );
    // Only the cgroup's processes: every series is the program's.
    let others: Vec<_> = pyro
        .iter()
        .filter_map(|r| r["series"].as_array())
        .flatten()
        .filter(|s| s["labels"]["cgroup"] != cg.path)
        .collect();
    assert!(others.is_empty(), "outside the cgroup: {others:#?}");

    // OTLP profiles: the same functions, the resource saying whose.
    let mut otel: Vec<Value> = Vec::new();
    let found = within(
        Duration::from_secs(30),
        "push_spin as OTLP profiles",
        || {
            otel.extend(otel_rx.try_iter());
            let profiles: Vec<_> = otel.iter().flat_map(otlp_profiles).collect();
            let cpu = profiles.iter().find(|(_, kind, names)| {
                kind == "samples" && names.iter().any(|n| n == "push_spin")
            })?;
            let off = profiles.iter().find(|(_, kind, names)| {
                kind == "off_cpu" && names.iter().any(|n| n.contains("nanosleep"))
            })?;
            Some((cpu.clone(), off.clone()))
        },
    );
    let errors: Vec<_> = otel.iter().filter(|r| r.get("error").is_some()).collect();
    assert!(errors.is_empty(), "the OTLP receiver refused: {errors:#?}");
    for (attrs, _, _) in [&found.0, &found.1] {
        assert_eq!(attrs.get("service.name"), Some(&comm), "{attrs:?}");
        assert_eq!(attrs.get("container.id"), Some(&id[..12].to_string()));
        assert_eq!(attrs.get("kdiag.cgroup"), Some(&cg.path));
    }

    // SIGTERM ends watch as ever, every push gone through.
    // SAFETY: kill on the child's own pid.
    unsafe { libc::kill(watch.0.id() as i32, libc::SIGTERM) };
    let status = within(Duration::from_secs(20), "watch's exit", || {
        watch.0.try_wait().unwrap()
    });
    let log: Vec<String> = log.try_iter().collect();
    assert_eq!(status.code(), Some(143), "{log:#?}");
    assert!(
        !log.iter().any(|l| l.contains("failed")),
        "every push went through: {log:#?}"
    );
}

/// watch's resident memory (VmRSS), in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    kib << 10
}

/// watch's CPU time (user + system), in seconds.
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

#[test]
fn a_pyroscope_down_for_a_minute_costs_watch_no_memory() {
    const TEST: &str = "a_pyroscope_down_for_a_minute_costs_watch_no_memory";
    if !require_root(TEST) {
        return;
    }
    let Some((pyro, port, requests)) = receiver(TEST, "pyroscope_receiver.py", None) else {
        return;
    };
    // The whole machine, a profile a second, with a busy program on it.
    let _busy = Guard(
        common::command(c_fixture("push_busy"))
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut watch = Guard(
        kdiag()
            .args(["watch", "--textfile"])
            .arg(env!("CARGO_TARGET_TMPDIR"))
            .args(["--pyroscope", &format!("http://127.0.0.1:{port}")])
            .args(["--push-interval", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = watch.0.id();
    let log = log_lines(&mut watch);
    let mut seen: Vec<Value> = Vec::new();
    within(Duration::from_secs(30), "five pushes", || {
        seen.extend(requests.try_iter());
        (seen.len() >= 5).then_some(())
    });
    let bytes: Vec<u64> = seen.iter().filter_map(|r| r["bytes"].as_u64()).collect();
    let mean = bytes.iter().sum::<u64>() / bytes.len() as u64;

    // Down for a minute: the queue fills within its first seconds (8
    // requests), then stays full.
    // Growth is of the floor: the least RSS of ten readings a second
    // apart, after the queue filled and at the end. A single reading may
    // fall while a window names the binaries of whatever else runs on the
    // machine (a compiler's 100 MB library parsed, then freed, the
    // allocator slow to give it back): a peak, not growth.
    drop(pyro);
    let down = Instant::now();
    let floor = |from: Duration| {
        std::thread::sleep(from.saturating_sub(down.elapsed()));
        let least = (0..10)
            .map(|_| {
                std::thread::sleep(Duration::from_secs(1));
                rss(pid)
            })
            .min()
            .unwrap();
        (least, cpu_s(pid))
    };
    let (rss_full, cpu_full) = floor(Duration::from_secs(5));
    let (rss_end, cpu_end) = floor(Duration::from_secs(50));
    let grew = rss_end.saturating_sub(rss_full);
    eprintln!(
        "{TEST}: requests of {mean} bytes on average; least RSS {rss_full} -> {rss_end} bytes over the last 45 s down; CPU {:.2} s in 45 s",
        cpu_end - cpu_full
    );
    // 45 more windows kept would be 45 requests; the bound is half that
    // or 1 MiB, whichever is larger (the allocator's own slack).
    let bound = (45 * mean / 2).max(1 << 20);
    assert!(grew <= bound, "RSS grew {grew} bytes (bound {bound})");

    // Back up: the pushes go through again, the dropped ones counted.
    let Some((_pyro, _, requests)) = receiver(TEST, "pyroscope_receiver.py", Some(port)) else {
        return;
    };
    within(
        Duration::from_secs(30),
        "a push after the receiver is back",
        || requests.try_iter().next(),
    );
    let mut lines: Vec<String> = Vec::new();
    let back = within(Duration::from_secs(10), "the log saying so", || {
        lines.extend(log.try_iter());
        lines.iter().find(|l| l.contains("works again")).cloned()
    });
    assert!(
        lines
            .iter()
            .any(|l| l.contains("Pyroscope push") && l.contains("failed")),
        "{lines:#?}"
    );
    let dropped: u64 = back
        .rsplit_once('(')
        .and_then(|(_, n)| n.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{back}"));
    // 60 windows while down; at most 8 waiting and one being tried kept.
    assert!(dropped >= 45, "{back}");
}
