//! The `kdiag profile` report: top functions by self and total, the hottest
//! stacks, notes on stacks that cannot be trusted, and a footer with what was
//! lost and what profiling cost. A profile of counted events (`kdiag
//! faults`: `WeightUnit::Events`) gets the same report, worded with its
//! event.

use std::io::Write;

use serde::Serialize;

use crate::model::profile::{FunctionShare, Summary};
use crate::model::profile::{Profile, WeightUnit};
use crate::render::table::{Align, Table};

/// How many hottest stacks the text report prints.
const HOT_STACKS: usize = 3;

/// The JSON document: the profile (stacks and counters) and its summary.
#[derive(Serialize)]
pub struct Report<'a> {
    pub profile: &'a Profile,
    pub summary: &'a Summary,
}

pub fn json(out: &mut impl Write, profile: &Profile, summary: &Summary) -> anyhow::Result<()> {
    crate::render::json(out, &Report { profile, summary })
}

fn label(f: &FunctionShare) -> String {
    if f.kernel {
        format!("{} [k]", f.name)
    } else {
        f.name.clone()
    }
}

/// How the report words what its counts count.
struct Words<'a> {
    /// `samples`, or the event (`page-faults`).
    counts: &'a str,
    /// Where a stack's innermost frame is: `where the CPU was`.
    leaf: &'a str,
    /// What the self share measures: `self time`, `self page-faults`.
    own: String,
    total: String,
}

impl Words<'_> {
    fn of(p: &Profile) -> Words<'_> {
        match p.unit {
            WeightUnit::Events => Words {
                counts: &p.event,
                leaf: "where they happened",
                own: format!("self {}", p.event),
                total: format!("total {}", p.event),
            },
            WeightUnit::Samples | WeightUnit::Nanoseconds => Words {
                counts: "samples",
                leaf: "where the CPU was",
                own: "self time".into(),
                total: "total time".into(),
            },
        }
    }
}

fn shares(
    out: &mut impl Write,
    title: &str,
    col: &str,
    counts: &str,
    rows: &[FunctionShare],
) -> anyhow::Result<()> {
    writeln!(out, "{title}")?;
    let mut t = Table::new([
        (col.to_string(), Align::Right),
        (counts.to_uppercase(), Align::Right),
        ("FUNCTION".to_string(), Align::Left),
    ]);
    for f in rows {
        t.push(vec![
            format!("{:.1}%", f.percent),
            f.samples.to_string(),
            label(f),
        ]);
    }
    t.write(out)?;
    writeln!(out)?;
    Ok(())
}

/// The text report.
pub fn text(out: &mut impl Write, p: &Profile, s: &Summary) -> anyhow::Result<()> {
    let w = Words::of(p);
    match p.unit {
        WeightUnit::Events => writeln!(
            out,
            "{} of {}, {:.2} s, started {}: {} {}, {:.1}% in the kernel",
            crate::render::capitalized(&p.event),
            p.target,
            p.cost.wall_secs,
            p.started,
            s.samples,
            p.event,
            s.kernel_percent
        )?,
        WeightUnit::Samples | WeightUnit::Nanoseconds => writeln!(
            out,
            "Profile of {}, {:.2} s at {} Hz ({}), started {}: {} samples, {:.1}% in the kernel",
            p.target, p.cost.wall_secs, p.freq_hz, p.event, p.started, s.samples, s.kernel_percent
        )?,
    }
    if let Some(why) = &p.ended_early {
        writeln!(
            out,
            "Note: {why}; the report covers what was collected until then."
        )?;
    }
    writeln!(out)?;
    shares(
        out,
        &format!("Top functions by {} ({})", w.own, w.leaf),
        "SELF",
        w.counts,
        &s.top_self,
    )?;
    shares(
        out,
        &format!("Top functions by {} (on the stack)", w.total),
        "TOTAL",
        w.counts,
        &s.top_total,
    )?;
    writeln!(
        out,
        "Hottest stacks (outermost first, {} last; [k] = kernel)",
        w.leaf
    )?;
    for h in s.hottest.iter().take(HOT_STACKS) {
        writeln!(
            out,
            "  {:.1}% ({} {}) {}",
            h.percent, h.samples, w.counts, h.comm
        )?;
        for f in &h.frames {
            writeln!(out, "      {}", f.replace("_[k]", " [k]"))?;
        }
    }
    writeln!(out)?;
    // Only a CPU profile can walk stacks another way.
    let instead = match p.unit {
        WeightUnit::Samples => "Profile with `--call-graph auto` (or dwarf), or rebuild it",
        _ => "Rebuild it",
    };
    for t in &s.truncated {
        writeln!(
            out,
            "Note: {:.0}% of {}'s user stacks are only 1-2 frames deep: the binary was likely \
             built without frame pointers, so callers are missing. {instead} with \
             `-C force-frame-pointers=yes` (Rust) or `-fno-omit-frame-pointer` (C/C++).",
            t.percent, t.comm
        )?;
    }
    if !p.unknown_frames.is_empty() {
        writeln!(
            out,
            "Frames without a name (module+offset or [unknown]), by reason:"
        )?;
        for (why, n) in &p.unknown_frames {
            writeln!(out, "  {n:>7}  {why}")?;
        }
    }
    footer(out, p)
}

/// Samples (or events), losses, the tier, what it could not see, and the
/// probe effect.
pub fn footer(out: &mut impl Write, p: &Profile) -> anyhow::Result<()> {
    if p.unit == WeightUnit::Events {
        writeln!(
            out,
            "{}: {} counted, {} lost",
            crate::render::capitalized(&p.event),
            p.total_weight(),
            p.lost
        )?;
    } else {
        let mut samples = format!(
            "Samples: {} kept, {} records lost, {} throttles",
            p.samples, p.lost, p.throttled
        );
        if p.idle_samples > 0 {
            samples += &format!(
                "; {} idle samples left out (--include-idle shows them)",
                p.idle_samples
            );
        }
        writeln!(out, "{samples}")?;
    }
    match &p.collection {
        Some(how) => writeln!(out, "Tier: {how}")?,
        None => writeln!(
            out,
            "Tier: perf_event_open, {} at {} Hz with {}{}",
            p.event,
            p.freq_hz,
            call_graph(p),
            p.event_note
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        )?,
    }
    for note in &p.notes {
        writeln!(out, "Note: {note}")?;
    }
    if let Some(u) = &p.unwind {
        let mut line = format!(
            "Unwinding: {} samples unwound from DWARF CFI ({:.1} user frames on average, {:.1} ms)",
            u.dwarf_samples,
            u.dwarf_frames as f64 / u.dwarf_samples.max(1) as f64,
            u.secs * 1e3
        );
        if p.call_graph == "auto" {
            line += &format!(", {} kept their frame-pointer chain", u.fp_samples);
        }
        if u.stack_exhausted > 0 {
            line += &format!(
                "; {} ran past the {}-byte stack copy (raise --stack-size)",
                u.stack_exhausted,
                p.stack_size.unwrap_or(0)
            );
        }
        writeln!(out, "{line}")?;
    }
    let c = &p.cost;
    let mut cost = format!(
        "Probe effect: kdiag used {:.1} ms of CPU while recording {:.2} s ({:.2}% of one CPU)",
        c.kdiag_cpu_secs * 1e3,
        c.wall_secs,
        pct(c.kdiag_cpu_secs, c.wall_secs)
    );
    if let Some(busy) = c.profiled_cpu_secs.filter(|b| *b > 0.0) {
        cost += &format!(
            ", {:.2}% of the profiled CPU time ({:.2} s)",
            pct(c.kdiag_cpu_secs, busy),
            busy
        );
    }
    writeln!(
        out,
        "{cost}; report built in {:.0} ms after recording",
        c.post_secs * 1e3
    )?;
    Ok(())
}

/// How user stacks were walked, for the tier line.
fn call_graph(p: &Profile) -> String {
    let Some(stack) = p.stack_size else {
        return "frame-pointer callchains".into();
    };
    match p.call_graph.as_str() {
        "dwarf" => format!("DWARF unwinding of {stack}-byte user stack copies"),
        "auto" => format!(
            "frame pointers where the code keeps them, DWARF unwinding of {stack}-byte stack \
             copies elsewhere"
        ),
        _ => "frame-pointer callchains".into(),
    }
}

fn pct(a: f64, b: f64) -> f64 {
    if b > 0.0 { 100.0 * a / b } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::fold::summarize;
    use crate::model::profile::{Frame, ProbeCost, Stack};

    #[test]
    fn report_explains_losses_truncation_and_cost() {
        let p = Profile {
            target: "PID 7 (nofp)".into(),
            started: "2026-11-22T07:00:00Z".into(),
            event: "cpu-clock".into(),
            event_note: Some("no hardware PMU here, so no cycles event".into()),
            freq_hz: 99,
            unit: Default::default(),
            samples: 40,
            idle_samples: 5,
            lost: 3,
            throttled: 1,
            stacks: vec![Stack {
                comm: "nofp".into(),
                frames: vec![Frame::user("libc.so.6+0x2a1b0"), Frame::user("hot")],
                samples: 40,
                weight: 400,
                user_depth: 2,
                state: None,
                waker: None,
                ongoing: false,
            }],
            unknown_frames: vec![("libc.so.6: no symbols".into(), 1)],
            ended_early: Some("PID 7 exited during the run".into()),
            cost: ProbeCost {
                kdiag_cpu_secs: 0.002,
                wall_secs: 2.0,
                profiled_cpu_secs: Some(0.4),
                post_secs: 0.05,
            },
            ..Default::default()
        };
        let s = summarize(&p, 5);
        let mut out = Vec::new();
        text(&mut out, &p, &s).unwrap();
        let out = String::from_utf8(out).unwrap();
        for want in [
            "Profile of PID 7 (nofp), 2.00 s at 99 Hz (cpu-clock)",
            "Note: PID 7 exited during the run",
            "100.0%      40 hot",
            "built without frame pointers",
            "libc.so.6: no symbols",
            "Samples: 40 kept, 3 records lost, 1 throttles; 5 idle samples left out",
            "(no hardware PMU here, so no cycles event)",
            "kdiag used 2.0 ms of CPU while recording 2.00 s (0.10% of one CPU), 0.50% of the profiled CPU time (0.40 s)",
            "with frame-pointer callchains",
            "Profile with `--call-graph auto`",
        ] {
            assert!(out.contains(want), "missing {want:?} in\n{out}");
        }
        let mut js = Vec::new();
        json(&mut js, &p, &s).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&js).unwrap();
        assert_eq!(v["summary"]["top_self"][0]["name"], "hot");
        assert_eq!(v["profile"]["lost"], 3);
    }

    /// A profile of counted events is worded with its event, and says how
    /// it was collected and what that could not see.
    #[test]
    fn events_are_worded_with_the_event() {
        let p = Profile {
            target: "PID 7 (toucher)".into(),
            started: "2026-11-22T07:00:00Z".into(),
            event: "page-faults".into(),
            unit: WeightUnit::Events,
            samples: 64,
            lost: 1,
            stacks: vec![Stack {
                comm: "toucher".into(),
                frames: vec![Frame::user("main"), Frame::user("touch")],
                samples: 64,
                weight: 64,
                user_depth: 2,
                state: None,
                waker: None,
                ongoing: false,
            }],
            collection: Some("BPF, tp_btf/page_fault_user".into()),
            notes: vec!["no code paths".into()],
            cost: ProbeCost {
                wall_secs: 1.0,
                ..Default::default()
            },
            ..Default::default()
        };
        let s = summarize(&p, 5);
        let mut out = Vec::new();
        text(&mut out, &p, &s).unwrap();
        let out = String::from_utf8(out).unwrap();
        for want in [
            "Page-faults of PID 7 (toucher), 1.00 s, started 2026-11-22T07:00:00Z: 64 page-faults, \
             0.0% in the kernel",
            "Top functions by self page-faults (where they happened)",
            "Top functions by total page-faults (on the stack)",
            "  SELF PAGE-FAULTS FUNCTION",
            "100.0%          64 touch",
            "Hottest stacks (outermost first, where they happened last; [k] = kernel)",
            "  100.0% (64 page-faults) toucher",
            "Page-faults: 64 counted, 1 lost",
            "Tier: BPF, tp_btf/page_fault_user",
            "Note: no code paths",
        ] {
            assert!(out.contains(want), "missing {want:?} in\n{out}");
        }
        for unwanted in ["Hz", "Samples:", "perf_event_open", "where the CPU was"] {
            assert!(!out.contains(unwanted), "{unwanted:?} in\n{out}");
        }
        let mut js = Vec::new();
        json(&mut js, &p, &s).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&js).unwrap();
        assert_eq!(v["profile"]["unit"], "events");
        assert_eq!(v["profile"]["event"], "page-faults");
        assert_eq!(v["profile"]["notes"][0], "no code paths");
    }

    #[test]
    fn report_says_how_stacks_were_unwound() {
        let p = Profile {
            call_graph: "auto".into(),
            stack_size: Some(8192),
            unwind: Some(crate::model::profile::UnwindStats {
                dwarf_samples: 30,
                fp_samples: 10,
                dwarf_frames: 210,
                stack_exhausted: 2,
                no_stack: 0,
                secs: 0.0015,
            }),
            ..Default::default()
        };
        let mut out = Vec::new();
        footer(&mut out, &p).unwrap();
        let out = String::from_utf8(out).unwrap();
        for want in [
            "frame pointers where the code keeps them, DWARF unwinding of 8192-byte stack copies elsewhere",
            "Unwinding: 30 samples unwound from DWARF CFI (7.0 user frames on average, 1.5 ms), \
             10 kept their frame-pointer chain; 2 ran past the 8192-byte stack copy (raise --stack-size)",
        ] {
            assert!(out.contains(want), "missing {want:?} in\n{out}");
        }
    }
}
