//! The Prometheus text exposition format (version 0.0.4) of a watch
//! snapshot: `# HELP` and `# TYPE` once per metric, then one line per
//! series. Names follow Prometheus' and node_exporter's conventions (base
//! units, counters ending in `_total`); labels are the group and a fixed
//! set of values, never a PID, so the series stay few.

use std::fmt::Write;

use crate::model::watch::Snapshot;
use crate::render::metrics::{self, Kind, Metric, Point};

/// The Content-Type of this format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub fn render(s: &Snapshot) -> String {
    let mut out = Text(String::new());
    metrics::export(s, &mut out);
    out.0
}

struct Text(String);

impl metrics::Sink for Text {
    fn metric(&mut self, m: &Metric, points: Vec<Point>) {
        let kind = match m.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        // A name with a label in it: one metric per value of the label.
        let mut families: Vec<(String, Vec<&Point>)> = Vec::new();
        for p in &points {
            let name = match p.labels.first() {
                Some((l, v)) if m.prom.contains("{}") => {
                    let v = l
                        .in_name
                        .iter()
                        .find(|(a, _)| a == v)
                        .map_or(*v, |(_, b)| b);
                    m.prom.replace("{}", v)
                }
                _ => m.prom.to_string(),
            };
            match families.iter_mut().find(|(n, _)| *n == name) {
                Some((_, f)) => f.push(p),
                None => families.push((name, vec![p])),
            }
        }
        if families.is_empty() && !m.prom.contains("{}") {
            families.push((m.prom.to_string(), vec![]));
        }
        let out = &mut self.0;
        for (name, points) in families {
            let _ = writeln!(out, "# HELP {name} {}\n# TYPE {name} {kind}", m.help);
            for p in points {
                let in_name = usize::from(m.prom.contains("{}"));
                let labels: Vec<String> = p
                    .group
                    .map(|g| format!("group=\"{}\"", escape(g)))
                    .into_iter()
                    .chain(
                        p.labels[in_name..]
                            .iter()
                            .map(|(l, v)| format!("{}=\"{}\"", l.prom, escape(v))),
                    )
                    .collect();
                match labels.is_empty() {
                    true => writeln!(out, "{name} {}", p.value),
                    false => writeln!(out, "{name}{{{}}} {}", labels.join(","), p.value),
                }
                .unwrap();
            }
        }
    }
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
    use crate::model::watch::{Group, Pressure, STATES};

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
