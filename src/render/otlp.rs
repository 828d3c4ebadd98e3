//! OTLP, the OpenTelemetry protocol: a watch snapshot as an
//! `ExportMetricsServiceRequest` and its events (verdict changes, flight
//! records) as an `ExportLogsServiceRequest`, protobuf-encoded as OTLP/HTTP
//! sends them (opentelemetry-proto: collector/metrics/v1, metrics/v1,
//! collector/logs/v1, logs/v1, common/v1, resource/v1).
//!
//! The metrics are the Prometheus exposition's, named as OpenTelemetry
//! names them (dotted, the unit in `unit`, not in the name): counters are
//! cumulative monotonic sums, the rest gauges. A group's data points carry
//! `kdiag.group` and the semantic conventions' attributes where they exist:
//! `process.executable.name` (groups by name), `process.pid` (--pid),
//! `container.id` and `k8s.pod.uid` (a cgroup whose path says so).

use crate::analysis::watch::worth_a_record;
use crate::model::diagnosis::Class;
use crate::model::watch::{Event, Group, STATES, Snapshot};
use crate::render::protobuf::Msg;

/// The Content-Type of OTLP/HTTP's binary protobuf encoding.
pub const CONTENT_TYPE: &str = "application/x-protobuf";

/// Who sends, and since when its counters count.
pub struct Source {
    pub host: String,
    pub start_unix_ns: u64,
}

/// An attribute's value.
enum Val {
    Str(String),
    Int(i64),
}

type Attrs = Vec<(&'static str, Val)>;

fn str(s: &str) -> Val {
    Val::Str(s.to_string())
}

/// A `KeyValue` with its `AnyValue`.
fn key_value(key: &str, v: &Val) -> Msg {
    let mut any = Msg::default();
    match v {
        // string_value = 1 (written even when empty: it is a oneof).
        Val::Str(s) => any.bytes(1, s.as_bytes()),
        // int_value = 3, a varint of the two's complement.
        Val::Int(i) => any.uint(3, *i as u64),
    };
    let mut kv = Msg::default();
    kv.string(1, key).msg(2, &any);
    kv
}

fn with_attrs(m: &mut Msg, field: u32, attrs: &Attrs) {
    for (k, v) in attrs {
        m.msg(field, &key_value(k, v));
    }
}

/// The resource (`Resource`, attributes = 1) and scope
/// (`InstrumentationScope`: name = 1, version = 2) every request carries.
fn resource_and_scope(src: &Source) -> (Msg, Msg) {
    let mut resource = Msg::default();
    with_attrs(
        &mut resource,
        1,
        &vec![
            ("service.name", str("kdiag")),
            ("service.version", str(env!("CARGO_PKG_VERSION"))),
            ("host.name", str(&src.host)),
        ],
    );
    let mut scope = Msg::default();
    scope
        .string(1, "kdiag.watch")
        .string(2, env!("CARGO_PKG_VERSION"));
    (resource, scope)
}

/// A group's attributes: its name, and what the semantic conventions
/// call what it is.
fn group_attrs(s: &Snapshot, name: &str) -> Attrs {
    let mut a = vec![("kdiag.group", str(name))];
    if !s.by_cgroup {
        a.push(("process.executable.name", str(name)));
    }
    if let Some(pid) = s.pid {
        a.push(("process.pid", Val::Int(pid as i64)));
    }
    let runs_as = s
        .groups
        .iter()
        .find(|g| g.name == name)
        .and_then(|g| g.runs_as.as_ref());
    if let Some(r) = runs_as {
        a.push(("kdiag.runs_as", str(&r.what)));
        a.push(("kdiag.runs_as.name", str(&r.name)));
        if r.is_container() {
            a.push(("container.id", str(&r.name)));
        }
        if let Some(pod) = &r.pod {
            a.push(("k8s.pod.uid", str(pod)));
        }
    }
    a
}

#[derive(Clone, Copy)]
enum Num {
    F(f64),
    I(u64),
}

/// How a metric aggregates: a cumulative monotonic sum or a gauge.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Counter,
    Gauge,
}

struct Metric {
    name: &'static str,
    unit: &'static str,
    kind: Kind,
    help: &'static str,
    points: Vec<(Attrs, Num)>,
}

impl Metric {
    /// `Metric`: name = 1, description = 2, unit = 3, gauge = 5 or sum = 7
    /// (`Sum`: data_points = 1, aggregation_temporality = 2, CUMULATIVE
    /// being 2, is_monotonic = 3); each `NumberDataPoint`: attributes = 7,
    /// start_time_unix_nano = 2, time_unix_nano = 3, as_double = 4 or
    /// as_int = 6.
    fn encode(&self, start: u64, now: u64) -> Msg {
        let mut data = Msg::default();
        for (attrs, value) in &self.points {
            let mut p = Msg::default();
            with_attrs(&mut p, 7, attrs);
            if self.kind == Kind::Counter {
                p.fixed64(2, start);
            }
            p.fixed64(3, now);
            match *value {
                Num::F(f) => p.double(4, f),
                Num::I(i) => p.fixed64(6, i),
            };
            data.msg(1, &p);
        }
        let mut m = Msg::default();
        m.string(1, self.name)
            .string(2, self.help)
            .string(3, self.unit);
        match self.kind {
            Kind::Gauge => m.msg(5, &data),
            Kind::Counter => {
                data.uint(2, 2).bool(3, true);
                m.msg(7, &data)
            }
        };
        m
    }
}

/// The snapshot's metrics, each with its data points.
fn metric_list(s: &Snapshot) -> Vec<Metric> {
    let per_group = |f: &dyn Fn(&Group) -> Option<Num>| -> Vec<(Attrs, Num)> {
        s.groups
            .iter()
            .filter_map(|g| Some((group_attrs(s, &g.name), f(g)?)))
            .collect()
    };
    let with = |mut a: Attrs, key: &'static str, v: &str| {
        a.push((key, str(v)));
        a
    };
    let mut thread = Vec::new();
    let mut storage = Vec::new();
    for g in &s.groups {
        for ((_, state), secs) in STATES.iter().zip(g.thread_seconds) {
            let a = with(group_attrs(s, &g.name), "kdiag.thread.state", state);
            thread.push((a, Num::F(secs)));
        }
        for (dir, bytes) in [("read", g.read_bytes), ("write", g.write_bytes)] {
            let a = with(group_attrs(s, &g.name), "disk.io.direction", dir);
            storage.push((a, Num::I(bytes)));
        }
    }
    let verdicts = s
        .groups
        .iter()
        .filter_map(|g| {
            let a = with(group_attrs(s, &g.name), "kdiag.verdict", g.verdict?.name());
            Some((a, Num::I(1)))
        })
        .collect();
    let flight = s
        .flight
        .iter()
        .map(|f| {
            let a = with(group_attrs(s, &f.group), "kdiag.verdict", f.verdict.name());
            (a, Num::I(f.records))
        })
        .collect();
    let pressure = |full: bool| -> Vec<(Attrs, Num)> {
        s.pressure
            .iter()
            .filter_map(|p| {
                let v = if full { p.stalled_s? } else { p.waiting_s };
                Some((
                    vec![("kdiag.pressure.resource", str(&p.resource))],
                    Num::F(v),
                ))
            })
            .collect()
    };
    let own = |v: Num| vec![(Attrs::new(), v)];
    let c = &s.cost;
    use Kind::{Counter, Gauge};
    let m = |name, unit, kind, help, points| Metric {
        name,
        unit,
        kind,
        help,
        points,
    };
    vec![
        m(
            "kdiag.thread.time",
            "s",
            Counter,
            "Thread time of the group's threads by state (diagnose's thread-state model).",
            thread,
        ),
        m(
            "kdiag.verdict",
            "1",
            Gauge,
            "The group's verdict over the last interval (1 for the verdict it has).",
            verdicts,
        ),
        m(
            "kdiag.major_faults",
            "{fault}",
            Counter,
            "Page faults of the group that had to read the page.",
            per_group(&|g| Some(Num::I(g.major_faults))),
        ),
        m(
            "kdiag.storage.io",
            "By",
            Counter,
            "Bytes the group's processes caused to be read from or written to storage.",
            storage,
        ),
        m(
            "kdiag.group.processes",
            "{process}",
            Gauge,
            "Processes in the group at the last scan.",
            per_group(&|g| Some(Num::I(g.processes as u64))),
        ),
        m(
            "kdiag.group.threads",
            "{thread}",
            Gauge,
            "Threads in the group at the last scan.",
            per_group(&|g| Some(Num::I(g.threads as u64))),
        ),
        m(
            "kdiag.cgroup.throttled.time",
            "s",
            Counter,
            "Time the group's cgroup was throttled by its CPU quota (cpu.stat), with --group-by cgroup.",
            per_group(&|g| Some(Num::F(g.throttled_s?))),
        ),
        m(
            "kdiag.cgroup.throttled.periods",
            "{period}",
            Counter,
            "Quota periods in which the group's cgroup was throttled, with --group-by cgroup.",
            per_group(&|g| Some(Num::I(g.throttled_periods?))),
        ),
        m(
            "kdiag.flight.records",
            "{record}",
            Counter,
            "Flight records kept of the group in --flight-dir, by watch's verdict.",
            flight,
        ),
        m(
            "kdiag.pressure.waiting.time",
            "s",
            Counter,
            "Time some task waited for the resource (PSI \"some\").",
            pressure(false),
        ),
        m(
            "kdiag.pressure.stalled.time",
            "s",
            Counter,
            "Time every non-idle task stalled on the resource at once (PSI \"full\").",
            pressure(true),
        ),
        m(
            "kdiag.watch.cpu.time",
            "s",
            Counter,
            "CPU time kdiag watch used, user and system.",
            own(Num::F(c.cpu_s)),
        ),
        m(
            "kdiag.watch.memory.usage",
            "By",
            Gauge,
            "kdiag watch's resident memory.",
            own(Num::I(c.rss_bytes)),
        ),
        m(
            "kdiag.watch.scan.duration",
            "s",
            Gauge,
            "Wall time of the last scan of /proc.",
            own(Num::F(c.scan_s)),
        ),
        m(
            "kdiag.watch.processes",
            "{process}",
            Gauge,
            "Processes watched at the last scan.",
            own(Num::I(c.processes as u64)),
        ),
        m(
            "kdiag.watch.thread_samples",
            "{sample}",
            Counter,
            "Thread states sampled.",
            own(Num::I(c.samples_total)),
        ),
    ]
}

/// `ExportMetricsServiceRequest`: resource_metrics = 1 (`ResourceMetrics`:
/// resource = 1, scope_metrics = 2; `ScopeMetrics`: scope = 1, metrics = 2).
/// Metrics without a data point are left out.
pub fn metrics(s: &Snapshot, src: &Source, now_unix_ns: u64) -> Vec<u8> {
    let (resource, scope) = resource_and_scope(src);
    let mut sm = Msg::default();
    sm.msg(1, &scope);
    for m in metric_list(s).iter().filter(|m| !m.points.is_empty()) {
        sm.msg(2, &m.encode(src.start_unix_ns, now_unix_ns));
    }
    let mut rm = Msg::default();
    rm.msg(1, &resource).msg(2, &sm);
    let mut req = Msg::default();
    req.msg(1, &rm);
    req.0
}

/// OTLP's severity numbers (logs/v1 `SeverityNumber`) and texts.
const INFO: (u64, &str) = (9, "INFO");
const WARN: (u64, &str) = (13, "WARN");

/// `ExportLogsServiceRequest`: resource_logs = 1 (`ResourceLogs`: resource
/// = 1, scope_logs = 2; `ScopeLogs`: scope = 1, log_records = 2), one
/// `LogRecord` an event: time_unix_nano = 1, severity_number = 2,
/// severity_text = 3, body = 5 (a string `AnyValue`), attributes = 6,
/// observed_time_unix_nano = 11, event_name = 12.
pub fn logs(events: &[Event], s: &Snapshot, src: &Source, now_unix_ns: u64) -> Vec<u8> {
    let (resource, scope) = resource_and_scope(src);
    let mut sl = Msg::default();
    sl.msg(1, &scope);
    for e in events {
        let (event, severity, body, attrs) = log_record(e, s);
        let mut body_value = Msg::default();
        body_value.bytes(1, body.as_bytes());
        let mut r = Msg::default();
        r.fixed64(1, now_unix_ns)
            .uint(2, severity.0)
            .string(3, severity.1)
            .msg(5, &body_value);
        with_attrs(&mut r, 6, &attrs);
        r.fixed64(11, now_unix_ns).string(12, event);
        sl.msg(2, &r);
    }
    let mut rl = Msg::default();
    rl.msg(1, &resource).msg(2, &sl);
    let mut req = Msg::default();
    req.msg(1, &rl);
    req.0
}

/// An event's name, severity, text (as watch's log says it) and attributes.
fn log_record(e: &Event, s: &Snapshot) -> (&'static str, (u64, &'static str), String, Attrs) {
    let severity = |c: Class| if worth_a_record(c) { WARN } else { INFO };
    match e {
        Event::Verdict { group, from, to } => {
            let mut a = group_attrs(s, group);
            a.push(("kdiag.verdict", str(to.name())));
            let was = match from {
                Some(f) => {
                    a.push(("kdiag.verdict.previous", str(f.name())));
                    format!(" (was {})", f.name())
                }
                None => String::new(),
            };
            let body = format!("{group} is {}{was}", to.name());
            ("kdiag.verdict.change", severity(*to), body, a)
        }
        Event::Flight {
            group,
            verdict,
            pid,
            found,
            record,
            report,
            profile,
        } => {
            let mut a = group_attrs(s, group);
            a.retain(|(k, _)| *k != "process.pid");
            a.extend([
                ("kdiag.verdict", str(verdict.name())),
                ("process.pid", Val::Int(*pid as i64)),
                ("kdiag.diagnosis.verdict", str(found.name())),
                ("kdiag.flight.record", str(&record.to_string_lossy())),
                ("kdiag.flight.report", str(&report.to_string_lossy())),
            ]);
            if let Some(p) = profile {
                a.push(("kdiag.flight.profile", str(&p.to_string_lossy())));
            }
            let body = format!(
                "flight record of {group} ({}; diagnose of PID {pid} says {}): {} and {}",
                verdict.name(),
                found.name(),
                record.display(),
                report.display()
            );
            ("kdiag.flight.record", severity(*verdict), body, a)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_has_a_dotted_name_a_unit_and_no_unit_in_its_name() {
        let g = Group {
            name: "db".into(),
            verdict: Some(Class::Io),
            throttled_s: Some(1.0),
            throttled_periods: Some(2),
            ..Group::default()
        };
        let s = Snapshot {
            groups: vec![g],
            ..Snapshot::default()
        };
        let list = metric_list(&s);
        let mut names: Vec<_> = list.iter().map(|m| m.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), list.len(), "one metric a name");
        for m in &list {
            assert!(m.name.starts_with("kdiag."), "{}", m.name);
            assert!(!m.unit.is_empty(), "{}", m.name);
            assert!(
                !m.name.ends_with("seconds") && !m.name.ends_with("bytes"),
                "{}",
                m.name
            );
        }
        let thread = &list[0];
        assert_eq!(thread.points.len(), STATES.len());
        assert!(
            thread.points[0]
                .0
                .iter()
                .any(|(k, v)| *k == "process.executable.name"
                    && matches!(v, Val::Str(n) if n == "db"))
        );
    }
}
