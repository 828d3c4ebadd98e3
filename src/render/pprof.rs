//! pprof output: a gzip'd `profile.proto` (github.com/google/pprof,
//! proto/profile.proto), as `go tool pprof`, Parca, Pyroscope and Grafana
//! read it, written with kdiag's protobuf encoder (render::protobuf).
//!
//! A stack set's sample carries two values, the stack's sample count and
//! weight (`samples/count` and e.g. `cpu/nanoseconds`), or one when they
//! are the same (counted events: `page-faults/count`), and a `comm` label;
//! a wall-clock profile's carries `cpu`, `off_cpu` and `wall` nanoseconds
//! and labels saying the thread and the kind of time. Frames
//! become one function and one location each, kernel frames in a
//! `[kernel.kallsyms]` mapping, user frames in their binary's mapping with
//! its build id. Names are already resolved (`has_functions`), so locations
//! carry no addresses.

use std::collections::HashMap;
use std::io::Write;

use crate::model::flame::Flame;
use crate::model::profile::{Frame, Module, Stack, WeightUnit};
use crate::model::stacks::{StackSet, ValueType};
use crate::model::wall::{TimeKind, Wall};
use crate::render::protobuf::Msg;

/// Strings by index; index 0 is the empty string, as the format requires.
struct Strings {
    list: Vec<String>,
    index: HashMap<String, u64>,
}

impl Strings {
    fn new() -> Self {
        let mut s = Strings {
            list: Vec::new(),
            index: HashMap::new(),
        };
        s.get("");
        s
    }

    fn get(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.list.len() as u64;
        self.list.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// One sample as the encoder takes it: frames outermost first, one value
/// per sample type, and string labels.
struct Sample<'a> {
    frames: std::borrow::Cow<'a, [Frame]>,
    values: Vec<u64>,
    labels: Vec<(&'static str, String)>,
}

/// A profile as the encoder takes it, from a `StackSet` or a `Wall`.
struct Doc<'a> {
    title: String,
    sample_types: Vec<ValueType>,
    /// The type `go tool pprof` shows by default.
    default_type: String,
    period_type: ValueType,
    period: u64,
    start_unix_ns: u64,
    duration_ns: u64,
    samples: Vec<Sample<'a>>,
    modules: &'a [Module],
}

/// A stack set: its sample count and weight, a `comm` label.
fn set_doc<'a>(set: &'a StackSet<'_>) -> Doc<'a> {
    // Counted events: the count is the weight, so one value, not two of
    // the same name.
    let one = set.count == set.weight;
    Doc {
        title: set.title.clone(),
        sample_types: match one {
            true => vec![set.weight.clone()],
            false => vec![set.count.clone(), set.weight.clone()],
        },
        default_type: set.weight.kind.clone(),
        period_type: set.weight.clone(),
        period: set.period,
        start_unix_ns: set.start_unix_ns,
        duration_ns: set.duration_ns,
        samples: set
            .stacks
            .iter()
            .map(|s| Sample {
                frames: std::borrow::Cow::Borrowed(&s.frames),
                values: match one {
                    true => vec![s.weight],
                    false => vec![s.samples, s.weight],
                },
                labels: vec![("comm", s.comm.clone())],
            })
            .collect(),
        modules: set.modules,
    }
}

/// A wall-clock profile: `cpu`, `off_cpu` and `wall` nanoseconds (each
/// stack's time is one of the first two and always the third), labelled
/// with the thread (`comm`, `pid`, `tid`), the `kind` of time, the
/// `state` it blocked in and its `waker`'s name; a waker's stack continues
/// the waiter's past a `--` frame, as in the flame graph.
fn wall_doc(wall: &Wall) -> Doc<'_> {
    let ns = |kind: &str| ValueType::new(kind, "nanoseconds");
    Doc {
        title: format!("Wall-clock profile of {}", wall.target),
        sample_types: vec![ns("cpu"), ns("off_cpu"), ns("wall")],
        default_type: "wall".into(),
        period_type: ns("cpu"),
        period: 1_000_000_000 / wall.freq_hz.max(1),
        start_unix_ns: wall.started_unix_ns,
        duration_ns: wall.window_ns,
        samples: wall
            .stacks
            .iter()
            .map(|s| {
                let root = &wall.roots[s.root].root;
                let on_cpu = s.kind == TimeKind::OnCpu;
                let mut labels = vec![("comm", root.comm.clone()), ("kind", s.kind.name().into())];
                if root.pid != 0 {
                    labels.push(("pid", root.pid.to_string()));
                }
                if root.tid != 0 {
                    labels.push(("tid", root.tid.to_string()));
                }
                if let Some(state) = s.state {
                    labels.push(("state", state.letter().to_string()));
                }
                if let Some(w) = &s.waker {
                    labels.push(("waker", w.comm.clone()));
                }
                Sample {
                    frames: s.graph_frames(),
                    values: vec![
                        if on_cpu { s.ns } else { 0 },
                        if on_cpu { 0 } else { s.ns },
                        s.ns,
                    ],
                    labels,
                }
            })
            .collect(),
        modules: &wall.modules,
    }
}

/// The profile.proto message of a stack set, not compressed.
pub fn encode(set: &StackSet<'_>) -> Vec<u8> {
    encode_doc(&set_doc(set))
}

fn encode_doc(doc: &Doc<'_>) -> Vec<u8> {
    let mut strings = Strings::new();
    let mut p = Msg::default();
    let value_type = |strings: &mut Strings, v: &ValueType| {
        let mut m = Msg::default();
        m.uint(1, strings.get(&v.kind))
            .uint(2, strings.get(&v.unit));
        m
    };
    // sample_type = 1
    for t in &doc.sample_types {
        p.msg(1, &value_type(&mut strings, t));
    }

    // Functions by (name, kernel); locations by (function, mapping). The
    // kernel's mapping id comes after the binaries' (1-based) ids.
    let kernel_mapping = doc.modules.len() as u64 + 1;
    let mut functions: HashMap<(&str, bool), u64> = HashMap::new();
    let mut locations: HashMap<(u64, u64), u64> = HashMap::new();
    let mut function_msgs = Vec::new();
    let mut location_msgs = Vec::new();
    for sample in &doc.samples {
        let mut ids = Vec::with_capacity(sample.frames.len());
        // Leaf first, as pprof wants.
        for f in sample.frames.iter().rev() {
            let next = functions.len() as u64 + 1;
            let fid = *functions
                .entry((f.name.as_str(), f.kernel))
                .or_insert_with(|| {
                    let name = strings.get(&f.name);
                    let mut m = Msg::default();
                    m.uint(1, next).uint(2, name).uint(3, name);
                    function_msgs.push(m);
                    next
                });
            let mapping = match (f.kernel, f.module) {
                (true, _) => kernel_mapping,
                (false, Some(i)) => i as u64 + 1,
                (false, None) => 0,
            };
            let next = locations.len() as u64 + 1;
            let lid = *locations.entry((fid, mapping)).or_insert_with(|| {
                let mut line = Msg::default();
                line.uint(1, fid);
                let mut m = Msg::default();
                m.uint(1, next).uint(2, mapping).msg(4, &line);
                location_msgs.push(m);
                next
            });
            ids.push(lid);
        }
        let mut msg = Msg::default();
        msg.packed(1, ids).packed(2, sample.values.iter().copied());
        for (key, value) in &sample.labels {
            let mut label = Msg::default();
            label.uint(1, strings.get(key)).uint(2, strings.get(value));
            msg.msg(3, &label);
        }
        p.msg(2, &msg);
    }
    // mapping = 3
    for (i, m) in doc.modules.iter().enumerate() {
        let mut msg = Msg::default();
        msg.uint(1, i as u64 + 1)
            .uint(5, strings.get(&m.path))
            .uint(6, strings.get(m.build_id.as_deref().unwrap_or("")))
            .bool(7, true);
        p.msg(3, &msg);
    }
    if doc
        .samples
        .iter()
        .any(|s| s.frames.iter().any(|f| f.kernel))
    {
        let mut msg = Msg::default();
        msg.uint(1, kernel_mapping)
            .uint(5, strings.get("[kernel.kallsyms]"))
            .bool(7, true);
        p.msg(3, &msg);
    }
    for m in &location_msgs {
        p.msg(4, m); // location = 4
    }
    for m in &function_msgs {
        p.msg(5, m); // function = 5
    }
    let period_type = value_type(&mut strings, &doc.period_type);
    let comment = strings.get(&doc.title);
    let default_type = strings.get(&doc.default_type);
    for s in &strings.list {
        p.bytes(6, s.as_bytes()); // string_table = 6
    }
    p.uint(9, doc.start_unix_ns)
        .uint(10, doc.duration_ns)
        .msg(11, &period_type)
        .uint(12, doc.period)
        .packed(13, [comment])
        .uint(14, default_type);
    p.0
}

/// The gzip'd profile, as pprof files are stored.
pub fn gzipped(set: &StackSet<'_>) -> anyhow::Result<Vec<u8>> {
    gzip(&encode(set))
}

/// The gzip'd profile of a wall-clock profile (`kdiag profile --wall`).
pub fn wall_gzipped(wall: &Wall) -> anyhow::Result<Vec<u8>> {
    gzip(&encode_doc(&wall_doc(wall)))
}

/// The gzip'd profile of a diagnose record's flame graph (its drill-down
/// profile as folded stacks, the heaviest kept): a CPU profile's lines
/// count weighted samples, each `period` CPU nanoseconds; an off-CPU
/// profile's count microseconds blocked (how many blocks is not kept); a
/// profile of counted events' count the events.
pub fn flame_gzipped(f: &Flame) -> anyhow::Result<Vec<u8>> {
    let (title, count, weight, period, per_line) = match f.unit {
        WeightUnit::Samples => (
            "CPU profile".to_string(),
            ValueType::new("samples", "count"),
            ValueType::new("cpu", "nanoseconds"),
            match f.freq_hz {
                0 => f.total_weight / f.samples.max(1),
                hz => 1_000_000_000 / hz,
            },
            None,
        ),
        WeightUnit::Nanoseconds => (
            "Off-CPU profile".to_string(),
            ValueType::new("off-cpu", "microseconds"),
            ValueType::new("off-cpu", "nanoseconds"),
            0,
            Some(1000),
        ),
        WeightUnit::Events => (
            format!("{} profile", f.event),
            ValueType::new(&f.event, "count"),
            ValueType::new(&f.event, "count"),
            0,
            Some(1),
        ),
    };
    // What one counted unit of a line weighs.
    let each = per_line.unwrap_or(period);
    let stacks: Vec<Stack> = f
        .lines
        .iter()
        .filter_map(|line| {
            let (path, n) = line.rsplit_once(' ')?;
            let n: u64 = n.parse().ok()?;
            let mut names = path.split(';');
            Some(Stack {
                comm: names.next()?.to_string(),
                frames: names.map(crate::analysis::fold::frame_of).collect(),
                samples: n,
                weight: n * each,
                user_depth: 0,
                state: None,
                waker: None,
                ongoing: false,
            })
        })
        .collect();
    gzipped(&StackSet {
        title: format!("{title} of {}", f.target),
        count,
        weight,
        period,
        start_unix_ns: 0,
        duration_ns: (f.wall_s * 1e9) as u64,
        stacks: &stacks,
        modules: &[],
    })
}

fn gzip(raw: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(raw)?;
    Ok(gz.finish()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::profile::Profile;

    fn faults() -> Profile {
        Profile {
            target: "PID 7 (toucher)".into(),
            unit: WeightUnit::Events,
            event: "page-faults".into(),
            stacks: vec![Stack {
                comm: "toucher".into(),
                frames: vec![Frame::user("main"), Frame::user("touch")],
                samples: 3,
                weight: 3,
                user_depth: 2,
                state: None,
                waker: None,
                ongoing: false,
            }],
            ..Default::default()
        }
    }

    /// Counted events are one value per sample, named for the event.
    #[test]
    fn events_are_one_value_named_for_the_event() {
        let p = faults();
        let set = StackSet::of(&p);
        let doc = set_doc(&set);
        assert_eq!(doc.sample_types, [ValueType::new("page-faults", "count")]);
        assert_eq!(doc.default_type, "page-faults");
        assert_eq!(doc.samples[0].values, [3]);
        assert_eq!(set.title, "page-faults profile of PID 7 (toucher)");
    }

    /// A diagnose record's flame graph of counted events keeps the counts.
    #[test]
    fn event_flames_keep_their_counts() {
        let p = faults();
        let lines = crate::analysis::fold::fold(&p);
        let flame = Flame::of(&p, lines, 0);
        let gz = flame_gzipped(&flame).unwrap();
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut raw).unwrap();
        let text = String::from_utf8_lossy(&raw);
        assert!(
            text.contains("page-faults") && text.contains("count"),
            "{text}"
        );
    }
}
