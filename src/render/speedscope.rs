//! speedscope output (https://www.speedscope.app/file-format-schema.json),
//! which speedscope opens and the Firefox Profiler imports.
//!
//! One "sampled" profile per root (command or thread name; a wall-clock
//! profile's thread or process), heaviest first; each distinct stack is one sample, root frame first, weighted by
//! the stack's weight in the set's unit. Frames are shared across profiles;
//! kernel frames carry `[k]` and the file `[kernel]`, user frames their
//! binary's path.

use std::collections::HashMap;

use serde::Serialize;

use crate::model::profile::{Frame as ProfileFrame, Module};
use crate::model::stacks::StackSet;
use crate::model::wall::{TimeKind, Wall};

#[derive(Serialize)]
struct File<'a> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    name: &'a str,
    exporter: String,
    #[serde(rename = "activeProfileIndex")]
    active_profile_index: usize,
    shared: Shared,
    profiles: Vec<Sampled>,
}

#[derive(Serialize)]
struct Shared {
    frames: Vec<Frame>,
}

#[derive(Serialize)]
struct Frame {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
}

#[derive(Serialize)]
struct Sampled {
    #[serde(rename = "type")]
    kind: &'static str,
    name: String,
    unit: &'static str,
    #[serde(rename = "startValue")]
    start_value: u64,
    #[serde(rename = "endValue")]
    end_value: u64,
    samples: Vec<Vec<usize>>,
    weights: Vec<u64>,
}

/// speedscope's name for a unit; anything else (counts, cycles) is "none".
fn unit(name: &str) -> &'static str {
    match name {
        "nanoseconds" => "nanoseconds",
        "microseconds" => "microseconds",
        "milliseconds" => "milliseconds",
        "seconds" => "seconds",
        "bytes" => "bytes",
        _ => "none",
    }
}

/// The speedscope JSON document of a stack set: one profile per `comm`.
pub fn json(set: &StackSet<'_>) -> anyhow::Result<Vec<u8>> {
    let stacks = set
        .stacks
        .iter()
        .map(|s| (s.comm.clone(), s.frames.iter().collect(), s.weight));
    document(&set.title, unit(&set.weight.unit), set.modules, stacks)
}

/// The speedscope JSON document of a wall-clock profile: one profile per
/// root (thread, or process with --per-process), weighted in nanoseconds,
/// each stack under a frame naming its kind of time (`[sleep]`), as in the
/// folded stacks.
pub fn wall_json(wall: &Wall) -> anyhow::Result<Vec<u8>> {
    let kinds: Vec<ProfileFrame> = TimeKind::ALL
        .iter()
        .map(|k| ProfileFrame::user(format!("[{}]", k.name())))
        .collect();
    let graphs: Vec<_> = wall.stacks.iter().map(|s| s.graph_frames()).collect();
    let stacks = wall.stacks.iter().zip(&graphs).map(|(s, graph)| {
        let kind = &kinds[TimeKind::ALL.iter().position(|&k| k == s.kind).unwrap_or(0)];
        let frames = std::iter::once(kind).chain(graph.iter()).collect();
        (wall.roots[s.root].root.label(), frames, s.ns)
    });
    let title = format!("Wall-clock profile of {}", wall.target);
    document(&title, "nanoseconds", &wall.modules, stacks)
}

/// The document: `stacks` are (profile name, frames outermost first,
/// weight), one profile per name, heaviest first.
fn document<'f>(
    title: &str,
    unit: &'static str,
    modules: &[Module],
    stacks: impl Iterator<Item = (String, Vec<&'f ProfileFrame>, u64)>,
) -> anyhow::Result<Vec<u8>> {
    let mut frames = Vec::new();
    let mut frame_index: HashMap<(&str, bool, Option<u32>), usize> = HashMap::new();
    let mut by_root: HashMap<String, Sampled> = HashMap::new();
    for (root, stack, weight) in stacks {
        if weight == 0 {
            continue; // speedscope refuses zero weights
        }
        let sample: Vec<usize> = stack
            .into_iter()
            .map(|f| {
                *frame_index
                    .entry((f.name.as_str(), f.kernel, f.module))
                    .or_insert_with(|| {
                        frames.push(Frame {
                            name: if f.kernel {
                                format!("{} [k]", f.name)
                            } else {
                                f.name.clone()
                            },
                            file: if f.kernel {
                                Some("[kernel]".into())
                            } else {
                                f.module
                                    .and_then(|m| modules.get(m as usize))
                                    .map(|m| m.path.clone())
                            },
                        });
                        frames.len() - 1
                    })
            })
            .collect();
        let p = by_root.entry(root.clone()).or_insert_with(|| Sampled {
            kind: "sampled",
            name: root,
            unit,
            start_value: 0,
            end_value: 0,
            samples: Vec::new(),
            weights: Vec::new(),
        });
        p.samples.push(sample);
        p.weights.push(weight);
        p.end_value += weight;
    }
    let mut profiles: Vec<Sampled> = by_root.into_values().collect();
    profiles.sort_by(|a, b| b.end_value.cmp(&a.end_value).then(a.name.cmp(&b.name)));
    let file = File {
        schema: "https://www.speedscope.app/file-format-schema.json",
        name: title,
        exporter: format!("kdiag {}", env!("CARGO_PKG_VERSION")),
        active_profile_index: 0,
        shared: Shared { frames },
        profiles,
    };
    Ok(serde_json::to_vec(&file)?)
}
