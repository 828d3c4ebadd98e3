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

use crate::model::diagnosis::Class;
use crate::model::watch::{Event, Snapshot};
use crate::render::metrics::{self, Kind, Metric, Num, Point};
use crate::render::protobuf::Msg;

/// The Content-Type of OTLP/HTTP's binary protobuf encoding.
pub const CONTENT_TYPE: &str = "application/x-protobuf";

/// Who sends, and since when its counters count.
pub struct Sender {
    pub host: String,
    pub start_unix_ns: u64,
}

/// An attribute's value.
pub(crate) enum Val {
    Str(String),
    Int(i64),
}

type Attrs = Vec<(&'static str, Val)>;

fn str(s: &str) -> Val {
    Val::Str(s.to_string())
}

/// A `KeyValue` with its `AnyValue`.
pub(crate) fn key_value(key: &str, v: &Val) -> Msg {
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
fn resource_and_scope(src: &Sender) -> (Msg, Msg) {
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
    let runs_as = s
        .groups
        .iter()
        .find(|g| g.name == name)
        .and_then(|g| g.runs_as.as_ref());
    // A group of processes by name (not a cgroup: no container or unit).
    if !s.by_cgroup && runs_as.is_none() {
        a.push(("process.executable.name", str(name)));
    }
    if let Some(pid) = s.pid {
        a.push(("process.pid", Val::Int(pid as i64)));
    }
    if let Some(r) = runs_as {
        a.extend(
            metrics::runs_as_labels(r)
                .iter()
                .map(|(l, v)| (l.otel, str(v))),
        );
    }
    a
}

/// The metrics, each a `Metric` of `ScopeMetrics` (metrics = 2):
/// name = 1, description = 2, unit = 3, gauge = 5 or sum = 7 (`Sum`:
/// data_points = 1, aggregation_temporality = 2, CUMULATIVE being 2,
/// is_monotonic = 3); each `NumberDataPoint`: attributes = 7,
/// start_time_unix_nano = 2, time_unix_nano = 3, as_double = 4 or as_int
/// = 6. Metrics without a data point are left out.
struct Metrics<'a> {
    s: &'a Snapshot,
    scope: Msg,
    start: u64,
    now: u64,
}

impl metrics::Sink for Metrics<'_> {
    fn metric(&mut self, m: &Metric, points: Vec<Point>) {
        let Some(name) = m.otel.filter(|_| !points.is_empty()) else {
            return;
        };
        let mut data = Msg::default();
        for point in points {
            let mut attrs = point.group.map_or(vec![], |g| group_attrs(self.s, g));
            attrs.extend(point.labels.iter().map(|(l, v)| (l.otel, str(v))));
            let mut p = Msg::default();
            with_attrs(&mut p, 7, &attrs);
            if m.kind == Kind::Counter {
                p.fixed64(2, self.start);
            }
            p.fixed64(3, self.now);
            match point.value {
                Num::F(f) => p.double(4, f),
                Num::I(i) => p.fixed64(6, i),
            };
            data.msg(1, &p);
        }
        let mut metric = Msg::default();
        metric.string(1, name).string(2, m.help).string(3, m.unit);
        match m.kind {
            Kind::Gauge => metric.msg(5, &data),
            Kind::Counter => {
                data.uint(2, 2).bool(3, true);
                metric.msg(7, &data)
            }
        };
        self.scope.msg(2, &metric);
    }
}

/// `ExportMetricsServiceRequest`: resource_metrics = 1 (`ResourceMetrics`:
/// resource = 1, scope_metrics = 2; `ScopeMetrics`: scope = 1, metrics = 2).
pub fn metrics(s: &Snapshot, src: &Sender, now_unix_ns: u64) -> Vec<u8> {
    let (resource, scope) = resource_and_scope(src);
    let mut sm = Metrics {
        s,
        scope: Msg::default(),
        start: src.start_unix_ns,
        now: now_unix_ns,
    };
    sm.scope.msg(1, &scope);
    metrics::export(s, &mut sm);
    let mut rm = Msg::default();
    rm.msg(1, &resource).msg(2, &sm.scope);
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
pub fn logs(events: &[Event], s: &Snapshot, src: &Sender, now_unix_ns: u64) -> Vec<u8> {
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
    let severity = |c: Class| if c.spec().record { WARN } else { INFO };
    match e {
        Event::Verdict { group, from, to } => {
            let mut a = group_attrs(s, group);
            a.push((metrics::VERDICT.otel, str(to.name())));
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
                (metrics::VERDICT.otel, str(verdict.name())),
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
    use crate::model::diagnosis::Class;
    use crate::model::watch::{Group, STATES};

    #[test]
    fn a_groups_points_carry_its_name_as_the_executable() {
        let g = Group {
            name: "db".into(),
            verdict: Some(Class::Io),
            ..Group::default()
        };
        let s = Snapshot {
            groups: vec![g],
            ..Snapshot::default()
        };
        let thread = &metrics::METRICS[0];
        let points = (thread.points)(&s);
        assert_eq!(points.len(), STATES.len());
        let attrs = group_attrs(&s, points[0].group.unwrap());
        assert!(
            attrs
                .iter()
                .any(|(k, v)| *k == "process.executable.name"
                    && matches!(v, Val::Str(n) if n == "db"))
        );
    }
}
