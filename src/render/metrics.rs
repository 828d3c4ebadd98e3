//! The one table of what `kdiag watch` exports: each metric's names (as
//! Prometheus and as OpenTelemetry name it), unit, kind, help and how its
//! data points are read from a snapshot. Every export format is a `Sink`
//! the table is given to, so a new metric is one row and a new format one
//! file (prometheus.rs, otlp.rs).

use crate::model::watch::{Group, STATES, Snapshot};

/// How a metric aggregates: a counter only grows (Prometheus' `_total`,
/// OTLP's cumulative monotonic sum), a gauge is the last value.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Kind {
    Counter,
    Gauge,
}

#[derive(Clone, Copy, Debug)]
pub enum Num {
    F(f64),
    I(u64),
}

impl std::fmt::Display for Num {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Num::F(v) => v.fmt(f),
            Num::I(v) => v.fmt(f),
        }
    }
}

/// A data point's label, as each format names it. `in_name`: the values
/// spelled otherwise where Prometheus puts the label in the metric's name.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Label {
    pub prom: &'static str,
    pub otel: &'static str,
    pub in_name: &'static [(&'static str, &'static str)],
}

const fn label(prom: &'static str, otel: &'static str) -> Label {
    Label {
        prom,
        otel,
        in_name: &[],
    }
}

pub const STATE: Label = label("state", "kdiag.thread.state");
pub const VERDICT: Label = label("verdict", "kdiag.verdict");
pub const DIRECTION: Label = Label {
    in_name: &[("write", "written")],
    ..label("direction", "disk.io.direction")
};
pub const RESOURCE: Label = label("resource", "kdiag.pressure.resource");
pub const RUNS_AS: Label = label("runs_as", "kdiag.runs_as");
pub const NAME: Label = label("name", "kdiag.runs_as.name");
pub const CONTAINER_ID: Label = label("container_id", "container.id");
pub const POD_UID: Label = label("pod_uid", "k8s.pod.uid");

/// One data point: the group it is of (each format says a group its own
/// way), its labels and its value.
pub struct Point<'a> {
    pub group: Option<&'a str>,
    pub labels: Vec<(Label, &'a str)>,
    pub value: Num,
}

pub struct Metric {
    /// Prometheus' name (base units, counters end in `_total`); a `{}` in
    /// it takes the value of the points' first label, one metric a value.
    pub prom: &'static str,
    /// OpenTelemetry's (dotted, the unit apart); None: not sent over OTLP.
    pub otel: Option<&'static str>,
    /// UCUM, as OTLP carries it.
    pub unit: &'static str,
    pub kind: Kind,
    pub help: &'static str,
    pub points: for<'a> fn(&'a Snapshot) -> Vec<Point<'a>>,
}

/// An export format: given every metric of the table in turn.
pub trait Sink {
    fn metric(&mut self, m: &Metric, points: Vec<Point>);
}

/// The snapshot's metrics, in the table's order, into `sink`.
pub fn export(s: &Snapshot, sink: &mut impl Sink) {
    for m in METRICS {
        sink.metric(m, (m.points)(s));
    }
}

fn per_group(s: &Snapshot, value: impl Fn(&Group) -> Option<Num>) -> Vec<Point<'_>> {
    labelled(s, |g| Some((vec![], value(g)?)))
}

/// A point of each group `point` gives labels and a value for.
fn labelled<'a>(
    s: &'a Snapshot,
    point: impl Fn(&'a Group) -> Option<(Vec<(Label, &'a str)>, Num)>,
) -> Vec<Point<'a>> {
    s.groups
        .iter()
        .filter_map(|g| {
            let (labels, value) = point(g)?;
            Some(Point {
                group: Some(&g.name),
                labels,
                value,
            })
        })
        .collect()
}

/// A point of each group for each value of `label` that `values` gives.
fn per_label<'a, V: IntoIterator<Item = (&'a str, Num)>>(
    s: &'a Snapshot,
    label: Label,
    values: impl Fn(&'a Group) -> V,
) -> Vec<Point<'a>> {
    s.groups
        .iter()
        .flat_map(|g| {
            values(g).into_iter().map(move |(v, value)| Point {
                group: Some(&g.name),
                labels: vec![(label, v)],
                value,
            })
        })
        .collect()
}

fn own(value: Num) -> Vec<Point<'static>> {
    vec![Point {
        group: None,
        labels: vec![],
        value,
    }]
}

fn pressure(s: &Snapshot, full: bool) -> Vec<Point<'_>> {
    s.pressure
        .iter()
        .filter_map(|p| {
            Some(Point {
                group: None,
                labels: vec![(RESOURCE, p.resource.as_str())],
                value: Num::F(if full { p.stalled_s? } else { p.waiting_s }),
            })
        })
        .collect()
}

use Kind::{Counter, Gauge};
use Num::{F, I};

pub const METRICS: &[Metric] = &[
    Metric {
        prom: "kdiag_thread_seconds_total",
        otel: Some("kdiag.thread.time"),
        unit: "s",
        kind: Counter,
        help: "Thread time of the group's threads by state (diagnose's thread-state model).",
        points: |s| {
            per_label(s, STATE, |g| {
                STATES
                    .iter()
                    .zip(g.thread_seconds)
                    .map(|((_, state), v)| (*state, F(v)))
            })
        },
    },
    Metric {
        prom: "kdiag_verdict",
        otel: Some("kdiag.verdict"),
        unit: "1",
        kind: Gauge,
        help: "The group's verdict over the last interval (1 for the verdict it has).",
        points: |s| {
            let of = |g: &Group| Some((VERDICT, g.verdict?.name()));
            labelled(s, |g| Some((vec![of(g)?], I(1))))
        },
    },
    Metric {
        prom: "kdiag_major_faults_total",
        otel: Some("kdiag.major_faults"),
        unit: "{fault}",
        kind: Counter,
        help: "Page faults of the group that had to read the page.",
        points: |s| per_group(s, |g| Some(I(g.major_faults))),
    },
    Metric {
        prom: "kdiag_storage_{}_bytes_total",
        otel: Some("kdiag.storage.io"),
        unit: "By",
        kind: Counter,
        help: "Bytes the group's processes caused to be read from or written to storage.",
        points: |s| {
            per_label(s, DIRECTION, |g| {
                [("read", I(g.read_bytes)), ("write", I(g.write_bytes))]
            })
        },
    },
    Metric {
        prom: "kdiag_group_processes",
        otel: Some("kdiag.group.processes"),
        unit: "{process}",
        kind: Gauge,
        help: "Processes in the group at the last scan.",
        points: |s| per_group(s, |g| Some(I(g.processes as u64))),
    },
    Metric {
        prom: "kdiag_group_threads",
        otel: Some("kdiag.group.threads"),
        unit: "{thread}",
        kind: Gauge,
        help: "Threads in the group at the last scan.",
        points: |s| per_group(s, |g| Some(I(g.threads as u64))),
    },
    // OTLP carries these labels on every point of the group instead.
    Metric {
        prom: "kdiag_group_info",
        otel: None,
        unit: "1",
        kind: Gauge,
        help: "Who runs in the group's cgroup as its path says (with --group-by cgroup): a container (its id), a pod's, a systemd unit.",
        points: |s| labelled(s, |g| Some((runs_as_labels(g.runs_as.as_ref()?), I(1)))),
    },
    Metric {
        prom: "kdiag_cgroup_throttled_seconds_total",
        otel: Some("kdiag.cgroup.throttled.time"),
        unit: "s",
        kind: Counter,
        help: "Time the group's cgroup was throttled by its CPU quota (CFS bandwidth, cpu.stat), with --group-by cgroup.",
        points: |s| per_group(s, |g| Some(F(g.throttled_s?))),
    },
    Metric {
        prom: "kdiag_cgroup_throttled_periods_total",
        otel: Some("kdiag.cgroup.throttled.periods"),
        unit: "{period}",
        kind: Counter,
        help: "Quota periods in which the group's cgroup was throttled (cpu.stat nr_throttled), with --group-by cgroup.",
        points: |s| per_group(s, |g| Some(I(g.throttled_periods?))),
    },
    Metric {
        prom: "kdiag_flight_records_total",
        otel: Some("kdiag.flight.records"),
        unit: "{record}",
        kind: Counter,
        help: "Flight records (diagnose's record and report) kept of the group in --flight-dir, by verdict.",
        points: |s| {
            let mut points = Vec::new();
            for f in &s.flight {
                points.push(Point {
                    group: Some(&f.group),
                    labels: vec![(VERDICT, f.verdict.name())],
                    value: I(f.records),
                });
            }
            points
        },
    },
    Metric {
        prom: "kdiag_pressure_{}_waiting_seconds_total",
        otel: Some("kdiag.pressure.waiting.time"),
        unit: "s",
        kind: Counter,
        help: "Time some task waited for the resource (PSI \"some\").",
        points: |s| pressure(s, false),
    },
    Metric {
        prom: "kdiag_pressure_{}_stalled_seconds_total",
        otel: Some("kdiag.pressure.stalled.time"),
        unit: "s",
        kind: Counter,
        help: "Time every non-idle task stalled on the resource at once (PSI \"full\").",
        points: |s| pressure(s, true),
    },
    Metric {
        prom: "process_cpu_seconds_total",
        otel: Some("kdiag.watch.cpu.time"),
        unit: "s",
        kind: Counter,
        help: "CPU time kdiag watch used, user and system.",
        points: |s| own(F(s.cost.cpu_s)),
    },
    Metric {
        prom: "process_resident_memory_bytes",
        otel: Some("kdiag.watch.memory.usage"),
        unit: "By",
        kind: Gauge,
        help: "kdiag watch's resident memory.",
        points: |s| own(I(s.cost.rss_bytes)),
    },
    Metric {
        prom: "kdiag_watch_scan_seconds",
        otel: Some("kdiag.watch.scan.duration"),
        unit: "s",
        kind: Gauge,
        help: "Wall time of the last scan of /proc.",
        points: |s| own(F(s.cost.scan_s)),
    },
    Metric {
        prom: "kdiag_watch_processes",
        otel: Some("kdiag.watch.processes"),
        unit: "{process}",
        kind: Gauge,
        help: "Processes watched at the last scan.",
        points: |s| own(I(s.cost.processes as u64)),
    },
    Metric {
        prom: "kdiag_watch_thread_samples_total",
        otel: Some("kdiag.watch.thread_samples"),
        unit: "{sample}",
        kind: Counter,
        help: "Thread states sampled.",
        points: |s| own(I(s.cost.samples_total)),
    },
];

/// Who runs in a group's cgroup, as labels: what, its name, and the
/// container's id and pod's uid where it has them.
pub fn runs_as_labels(r: &crate::model::watch::RunsAs) -> Vec<(Label, &str)> {
    let mut l = vec![(RUNS_AS, r.what.as_str()), (NAME, r.name.as_str())];
    if r.is_container() {
        l.push((CONTAINER_ID, &r.name));
    }
    if let Some(pod) = &r.pod {
        l.push((POD_UID, pod));
    }
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_has_its_names_a_unit_and_help() {
        let mut prom: Vec<_> = METRICS.iter().map(|m| m.prom).collect();
        let mut otel: Vec<_> = METRICS.iter().filter_map(|m| m.otel).collect();
        let (p, o) = (prom.len(), otel.len());
        prom.sort();
        prom.dedup();
        otel.sort();
        otel.dedup();
        assert_eq!((prom.len(), otel.len()), (p, o), "one metric a name");
        for m in METRICS {
            assert_eq!(m.kind == Counter, m.prom.ends_with("_total"), "{}", m.prom);
            assert!(!m.unit.is_empty() && !m.help.is_empty(), "{}", m.prom);
            if let Some(o) = m.otel {
                assert!(o.starts_with("kdiag."), "{o}");
                assert!(!o.ends_with("seconds") && !o.ends_with("bytes"), "{o}");
            }
        }
    }
}
