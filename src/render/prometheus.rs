//! The Prometheus text exposition format (version 0.0.4) of a watch
//! snapshot: `# HELP` and `# TYPE` once per metric, then one line per
//! series. Names follow Prometheus' and node_exporter's conventions (base
//! units, counters ending in `_total`); labels are the group and a fixed
//! set of values, never a PID, so the series stay few.

use std::fmt::Write;

use crate::model::watch::{STATES, Snapshot};

/// The Content-Type of this format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub fn render(s: &Snapshot) -> String {
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, lines: Vec<(String, String)>| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, value) in lines {
            if labels.is_empty() {
                let _ = writeln!(out, "{name} {value}");
            } else {
                let _ = writeln!(out, "{name}{{{labels}}} {value}");
            }
        }
    };
    let group = |name: &str| format!("group=\"{}\"", escape(name));
    metric(
        "kdiag_thread_seconds_total",
        "counter",
        "Thread time of the group's threads by state (diagnose's thread-state model).",
        s.groups
            .iter()
            .flat_map(|g| {
                STATES
                    .iter()
                    .zip(g.thread_seconds)
                    .map(move |((_, state), v)| {
                        (
                            format!("{},state=\"{state}\"", group(&g.name)),
                            v.to_string(),
                        )
                    })
            })
            .collect(),
    );
    metric(
        "kdiag_verdict",
        "gauge",
        "The group's verdict over the last interval (1 for the verdict it has).",
        s.groups
            .iter()
            .filter_map(|g| {
                let v = g.verdict?;
                Some((
                    format!("{},verdict=\"{}\"", group(&g.name), v.name()),
                    "1".into(),
                ))
            })
            .collect(),
    );
    let per_group = |f: fn(&crate::model::watch::Group) -> String| -> Vec<(String, String)> {
        s.groups.iter().map(|g| (group(&g.name), f(g))).collect()
    };
    metric(
        "kdiag_major_faults_total",
        "counter",
        "Page faults of the group that had to read the page.",
        per_group(|g| g.major_faults.to_string()),
    );
    metric(
        "kdiag_storage_read_bytes_total",
        "counter",
        "Bytes the group's processes caused to be read from storage.",
        per_group(|g| g.read_bytes.to_string()),
    );
    metric(
        "kdiag_storage_written_bytes_total",
        "counter",
        "Bytes the group's processes caused to be written to storage.",
        per_group(|g| g.write_bytes.to_string()),
    );
    metric(
        "kdiag_group_processes",
        "gauge",
        "Processes in the group at the last scan.",
        per_group(|g| g.processes.to_string()),
    );
    metric(
        "kdiag_group_threads",
        "gauge",
        "Threads in the group at the last scan.",
        per_group(|g| g.threads.to_string()),
    );
    metric(
        "kdiag_group_info",
        "gauge",
        "Who runs in the group's cgroup as its path says (with --group-by cgroup): a container (its id), a pod's, a systemd unit.",
        s.groups
            .iter()
            .filter_map(|g| {
                let r = g.runs_as.as_ref()?;
                let mut labels = format!(
                    "{},runs_as=\"{}\",name=\"{}\"",
                    group(&g.name),
                    escape(&r.what),
                    escape(&r.name)
                );
                if r.is_container() {
                    let _ = write!(labels, ",container_id=\"{}\"", escape(&r.name));
                }
                if let Some(pod) = &r.pod {
                    let _ = write!(labels, ",pod_uid=\"{}\"", escape(pod));
                }
                Some((labels, "1".into()))
            })
            .collect(),
    );
    let throttled: Vec<_> = s
        .groups
        .iter()
        .filter(|g| g.throttled_periods.is_some())
        .collect();
    metric(
        "kdiag_cgroup_throttled_seconds_total",
        "counter",
        "Time the group's cgroup was throttled by its CPU quota (CFS bandwidth, cpu.stat), with --group-by cgroup.",
        throttled
            .iter()
            .map(|g| (group(&g.name), g.throttled_s.unwrap_or(0.0).to_string()))
            .collect(),
    );
    metric(
        "kdiag_cgroup_throttled_periods_total",
        "counter",
        "Quota periods in which the group's cgroup was throttled (cpu.stat nr_throttled), with --group-by cgroup.",
        throttled
            .iter()
            .map(|g| (group(&g.name), g.throttled_periods.unwrap_or(0).to_string()))
            .collect(),
    );
    metric(
        "kdiag_flight_records_total",
        "counter",
        "Flight records (diagnose's record and report) kept of the group in --flight-dir, by verdict.",
        s.flight
            .iter()
            .map(|f| {
                (
                    format!("{},verdict=\"{}\"", group(&f.group), f.verdict.name()),
                    f.records.to_string(),
                )
            })
            .collect(),
    );
    for p in &s.pressure {
        let r = &p.resource;
        metric(
            &format!("kdiag_pressure_{r}_waiting_seconds_total"),
            "counter",
            &format!("Time some task waited for {r} (PSI \"some\")."),
            vec![(String::new(), p.waiting_s.to_string())],
        );
        if let Some(full) = p.stalled_s {
            metric(
                &format!("kdiag_pressure_{r}_stalled_seconds_total"),
                "counter",
                &format!("Time every non-idle task stalled on {r} at once (PSI \"full\")."),
                vec![(String::new(), full.to_string())],
            );
        }
    }
    let c = &s.cost;
    let one = |v: String| vec![(String::new(), v)];
    metric(
        "process_cpu_seconds_total",
        "counter",
        "CPU time kdiag watch used, user and system.",
        one(c.cpu_s.to_string()),
    );
    metric(
        "process_resident_memory_bytes",
        "gauge",
        "kdiag watch's resident memory.",
        one(c.rss_bytes.to_string()),
    );
    metric(
        "kdiag_watch_scan_seconds",
        "gauge",
        "Wall time of the last scan of /proc.",
        one(c.scan_s.to_string()),
    );
    metric(
        "kdiag_watch_processes",
        "gauge",
        "Processes watched at the last scan.",
        one(c.processes.to_string()),
    );
    metric(
        "kdiag_watch_thread_samples_total",
        "counter",
        "Thread states sampled.",
        one(c.samples_total.to_string()),
    );
    out
}

/// A label value, escaped as the format says: backslash, quote, newline.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::diagnosis::Class;
    use crate::model::watch::{Group, Pressure};

    #[test]
    fn renders_groups_verdicts_and_pressure() {
        let mut g = Group {
            name: "we\"ird\\name".into(),
            verdict: Some(Class::Io),
            major_faults: 3,
            ..Group::default()
        };
        g.thread_seconds[0] = 1.5;
        let s = Snapshot {
            groups: vec![g],
            pressure: vec![Pressure {
                resource: "io".into(),
                waiting_s: 2.0,
                stalled_s: Some(1.0),
            }],
            ..Snapshot::default()
        };
        let t = render(&s);
        assert!(
            t.contains(
                "kdiag_thread_seconds_total{group=\"we\\\"ird\\\\name\",state=\"on_cpu\"} 1.5\n"
            ),
            "{t}"
        );
        assert!(t.contains("kdiag_verdict{group=\"we\\\"ird\\\\name\",verdict=\"io\"} 1\n"));
        assert!(t.contains("kdiag_major_faults_total{group=\"we\\\"ird\\\\name\"} 3\n"));
        assert!(t.contains("kdiag_pressure_io_stalled_seconds_total 1\n"));
        assert_eq!(
            t.matches("# TYPE kdiag_thread_seconds_total counter")
                .count(),
            1
        );
        assert_eq!(t.matches("state=").count(), STATES.len());
        assert!(!t.contains("kdiag_group_info{"), "no cgroup, no info: {t}");
    }

    #[test]
    fn a_containers_group_says_its_id_and_pod() {
        let g = Group {
            name: "/kubepods/pod1234/3b61".into(),
            verdict: Some(Class::Cpu),
            runs_as: Some(crate::model::watch::RunsAs {
                what: "container".into(),
                name: "3b6190394e67".into(),
                pod: Some("1234".into()),
            }),
            ..Group::default()
        };
        let t = render(&Snapshot {
            groups: vec![g],
            ..Snapshot::default()
        });
        assert!(
            t.contains(
                "kdiag_group_info{group=\"/kubepods/pod1234/3b61\",runs_as=\"container\",name=\"3b6190394e67\",container_id=\"3b6190394e67\",pod_uid=\"1234\"} 1\n"
            ),
            "{t}"
        );
    }
}
