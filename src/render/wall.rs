//! The `kdiag profile --wall` report: each root's time by kind against the
//! window, the heaviest stacks of each kind, and the files: folded stacks
//! (`root;[kind];outer;...;inner ns`) and one SVG flame graph whose frames
//! are coloured by the kind of time under them. A wait with its waker
//! continues past a `--` frame with the waker's stack, innermost first
//! (Gregg's off-wake layout: `WallStack::graph_frames`).

use std::io::Write;

use inferno::flamegraph::color::{Color, PaletteMap};
use inferno::flamegraph::{self, Options};

use crate::analysis::fold::folded_frame;
use crate::analysis::wall::unaccounted;
use crate::model::wall::{OffcpuFrom, TimeKind, Wall, WallStack};
use crate::render::offcpu::{duration, one_line};
use crate::render::table::{Align, Table};

/// Stacks the text report prints.
const STACKS: usize = 12;

pub fn json(out: &mut impl Write, wall: &Wall) -> anyhow::Result<()> {
    crate::render::json(out, wall)
}

fn secs(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e9)
}

/// Where the off-CPU half came from, in a few words.
pub fn offcpu_source(wall: &Wall) -> String {
    match &wall.offcpu {
        OffcpuFrom::Bpf => "off CPU from BPF (sched_switch, exact, with stacks)".into(),
        OffcpuFrom::Proc { interval_ms, why } => format!(
            "off CPU from /proc sampled every {interval_ms} ms, WITHOUT stacks, each sample placed in \
             time at its sweep (no BPF: {why})"
        ),
    }
}

pub fn text(out: &mut impl Write, wall: &Wall) -> anyhow::Result<()> {
    writeln!(
        out,
        "Wall-clock time of {} over {:.3} s: on CPU sampled at {} Hz ({}), {}",
        wall.target,
        wall.window_ns as f64 / 1e9,
        wall.freq_hz,
        wall.event,
        offcpu_source(wall)
    )?;
    writeln!(out)?;
    let what = if wall.per_process {
        "PROCESS"
    } else {
        "THREAD"
    };
    let mut columns = vec![
        (what.to_string(), Align::Left),
        ("TOTAL s".into(), Align::Right),
    ];
    for k in TimeKind::ALL {
        columns.push((k.name().to_uppercase(), Align::Right));
    }
    columns.push(("UNSEEN".into(), Align::Right));
    columns.push(("±CPU".into(), Align::Right));
    let mut table = Table::new(columns);
    for r in &wall.roots {
        let mut row = vec![r.root.label(), secs(r.times.total())];
        row.extend(TimeKind::ALL.iter().map(|&k| secs(r.times.get(k))));
        row.push(secs(unaccounted(r, wall.window_ns)));
        row.push(secs(r.cpu_error_ns));
        table.push(row);
    }
    table.write(out)?;
    writeln!(
        out,
        "\nEach row adds up to the window ({:.3} s) for a thread alive throughout: ON-CPU is \
         sampled (samples × period, within ±CPU: 2√n + 1 periods), the rest is measured. \
         UNSEEN is the window less the total: a thread not alive the whole window, or asleep \
         since before tracing began (its first wait is seen only once it ends).",
        wall.window_ns as f64 / 1e9
    )?;
    if matches!(wall.offcpu, OffcpuFrom::Bpf) {
        writeln!(
            out,
            "RUN-QUEUE is time preempted and waiting for a CPU; a wait's own wake-up latency is \
             counted in that wait."
        )?;
    }

    writeln!(out, "\nHeaviest stacks:")?;
    for s in wall.stacks.iter().take(STACKS) {
        writeln!(
            out,
            "  {:>9}  {:<9}  {}  {}",
            duration(s.ns),
            s.kind.name(),
            wall.roots[s.root].root.label(),
            stack_line(s)
        )?;
    }
    if wall.lost_samples + wall.lost_stacks > 0 {
        writeln!(
            out,
            "\n{} CPU records and {} off-CPU stacks were lost; their time is kept under \
             [lost] frames or missing from ON-CPU.",
            wall.lost_samples, wall.lost_stacks
        )?;
    }
    if let Some(line) = lost_ends(wall) {
        writeln!(out, "\n{line}")?;
    }
    if let Some(why) = &wall.ended_early {
        writeln!(out, "\nThe target ended early: {why}")?;
    }
    let bpf = match wall.bpf_run_secs {
        Some(b) => format!("{b:.3} s in its BPF programs, in the traced threads"),
        None => "its BPF programs' time unknown (the kernel keeps no run-time statistics)".into(),
    };
    let total = wall.run_cpu_secs + wall.bpf_run_secs.unwrap_or(0.0);
    writeln!(
        out,
        "\nkdiag used {total:.3} s of CPU ({:.1}% of one CPU over the {:.2} s window): \
         {:.3} s in its own process from start to report ({:.3} s while recording), {bpf}.",
        100.0 * total / wall.cost.wall_secs.max(1e-9),
        wall.cost.wall_secs,
        wall.run_cpu_secs,
        wall.cost.kdiag_cpu_secs,
    )?;
    Ok(())
}

/// The off-CPU blocks not placed in time, when there are any.
fn lost_ends(wall: &Wall) -> Option<String> {
    (wall.lost_ends > 0).then(|| {
        format!(
            "{} off-CPU blocks ended faster than they could be read: their time is in the \
             totals but not placed in time (the heat map misses it).",
            wall.lost_ends
        )
    })
}

fn stack_line(s: &WallStack) -> String {
    if s.frames.is_empty() {
        return "(no stack: /proc)".into();
    }
    let frames: Vec<String> = s.frames.iter().map(folded_frame).collect();
    match &s.waker {
        Some(w) => format!("{}  (woken by {})", one_line(&frames), waker_line(w)),
        None if s.ongoing => format!("{}  (still waiting at the end)", one_line(&frames)),
        None => one_line(&frames),
    }
}

/// A waker in a line: its name and the innermost of its own frames (the
/// kernel's wake-up machinery left out).
fn waker_line(w: &crate::model::profile::Waker) -> String {
    let user: Vec<String> = w
        .frames
        .iter()
        .filter(|f| !f.kernel)
        .rev()
        .take(2)
        .map(folded_frame)
        .collect();
    let who = match w.tid {
        0 => w.comm.clone(),
        tid => format!("{} [{tid}]", w.comm),
    };
    match user.is_empty() {
        true => who,
        false => format!("{who} in {}", user.join(" < ")),
    }
}

/// The kind's frame under each root: `[sleep]`.
fn kind_frame(kind: TimeKind) -> String {
    format!("[{}]", kind.name())
}

/// A frame's name in the flame graph: off-CPU frames carry their kind, so
/// each kind's frames have their own names and so their own colours.
fn graph_frame(name: String, kind: TimeKind) -> String {
    match kind {
        TimeKind::OnCpu => name,
        k => format!("{name} ({})", k.name()),
    }
}

/// `root;[kind];outer;...;inner ns` lines, sorted.
pub fn folded(wall: &Wall) -> Vec<String> {
    let mut lines: Vec<String> = wall
        .stacks
        .iter()
        .filter(|s| s.ns > 0)
        .map(|s| {
            let mut parts = vec![
                crate::analysis::fold::sanitize(&wall.roots[s.root].root.label()),
                kind_frame(s.kind),
            ];
            parts.extend(
                s.graph_frames()
                    .iter()
                    .map(|f| graph_frame(folded_frame(f), s.kind)),
            );
            format!("{} {}", parts.join(";"), s.ns)
        })
        .collect();
    lines.sort();
    lines
}

/// The kind's base colour: warm for the CPU, cool or muted for waits.
pub fn colour(kind: TimeKind) -> (u8, u8, u8) {
    match kind {
        TimeKind::OnCpu => (230, 110, 40),
        TimeKind::RunQueue => (200, 60, 160),
        TimeKind::Storage => (60, 110, 220),
        TimeKind::Lock => (210, 40, 40),
        TimeKind::Sleep => (120, 120, 130),
        TimeKind::Wait => (60, 170, 170),
    }
}

/// One SVG flame graph of the whole profile, coloured by kind, the totals
/// in the title.
pub fn svg(wall: &Wall) -> anyhow::Result<Vec<u8>> {
    let lines = folded(wall);
    if lines.is_empty() {
        anyhow::bail!(
            "no time of {} was recorded, so no flame graph was written",
            wall.target
        );
    }
    let mut palette = PaletteMap::default();
    let shade = |(r, g, b): (u8, u8, u8), name: &str| {
        // A small per-name variation inside the kind's colour, so
        // neighbouring frames stay apart.
        let h = name
            .bytes()
            .fold(0u32, |h, c| h.wrapping_mul(31).wrapping_add(c as u32));
        let d = (h % 40) as i16 - 20;
        let v = |c: u8| (c as i16 + d).clamp(0, 255) as u8;
        Color {
            r: v(r),
            g: v(g),
            b: v(b),
        }
    };
    for s in &wall.stacks {
        let base = colour(s.kind);
        let kind = kind_frame(s.kind);
        palette.insert(&kind, shade(base, &kind));
        for f in s.graph_frames().iter() {
            let name = graph_frame(folded_frame(f), s.kind);
            let c = shade(base, &name);
            palette.insert(name, c);
        }
    }
    let mut totals = crate::model::wall::Times::default();
    for r in &wall.roots {
        for k in TimeKind::ALL {
            totals.add(k, r.times.get(k));
        }
    }
    let parts: Vec<String> = TimeKind::ALL
        .iter()
        .filter(|&&k| totals.get(k) > 0)
        .map(|&k| format!("{} {:.2} s", k.name(), totals.get(k) as f64 / 1e9))
        .collect();
    let mut opts = Options::default();
    opts.title = format!(
        "Wall-clock time of {} · {:.2} s window",
        wall.target,
        wall.window_ns as f64 / 1e9
    );
    opts.subtitle = Some(format!(
        "{} · {} {}",
        parts.join(" · "),
        wall.roots.len(),
        if wall.per_process {
            "processes"
        } else {
            "threads"
        }
    ));
    opts.count_name = "ns".into();
    opts.deterministic = true;
    opts.palette_map = Some(&mut palette);
    let mut out = Vec::new();
    flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::wall::{Merged, plain};
    use crate::model::wall::OffcpuFrom;

    fn wall(lost_ends: u64) -> Wall {
        let merged = Merged {
            roots: Vec::new(),
            stacks: Vec::new(),
            modules: Vec::new(),
        };
        let mut w = plain(
            "PID 1".into(),
            merged,
            1_000_000_000,
            20_000_000,
            99,
            OffcpuFrom::Bpf,
        );
        w.lost_ends = lost_ends;
        w
    }

    #[test]
    fn says_how_many_blocks_are_not_placed_in_time() {
        let mut out = Vec::new();
        text(&mut out, &wall(3)).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.contains(
                "\n3 off-CPU blocks ended faster than they could be read: their time is in the \
                 totals but not placed in time (the heat map misses it).\n"
            ),
            "{out}"
        );
        let mut json = Vec::new();
        super::json(&mut json, &wall(3)).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["lost_ends"], 3);

        let mut out = Vec::new();
        text(&mut out, &wall(0)).unwrap();
        assert!(!String::from_utf8(out).unwrap().contains("placed in time"));
    }
}
