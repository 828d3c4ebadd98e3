//! The `kdiag profile` report: top functions by self and total, the hottest
//! stacks, notes on stacks that cannot be trusted, and a footer with what was
//! lost and what profiling cost.

use std::io::Write;

use serde::Serialize;

use crate::analysis::fold::{FunctionShare, Summary};
use crate::model::profile::Profile;
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

fn shares(
    out: &mut impl Write,
    title: &str,
    col: &str,
    rows: &[FunctionShare],
) -> anyhow::Result<()> {
    writeln!(out, "{title}")?;
    let mut t = Table::new([
        (col, Align::Right),
        ("SAMPLES", Align::Right),
        ("FUNCTION", Align::Left),
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
    writeln!(
        out,
        "Profile of {}, {:.2} s at {} Hz ({}), started {}: {} samples, {:.1}% in the kernel",
        p.target, p.cost.wall_secs, p.freq_hz, p.event, p.started, s.samples, s.kernel_percent
    )?;
    if let Some(why) = &p.ended_early {
        writeln!(
            out,
            "Note: {why}; the report covers what was collected until then."
        )?;
    }
    writeln!(out)?;
    shares(
        out,
        "Top functions by self time (where the CPU was)",
        "SELF",
        &s.top_self,
    )?;
    shares(
        out,
        "Top functions by total time (on the stack)",
        "TOTAL",
        &s.top_total,
    )?;
    writeln!(
        out,
        "Hottest stacks (outermost first, where the CPU was last; [k] = kernel)"
    )?;
    for h in s.hottest.iter().take(HOT_STACKS) {
        writeln!(
            out,
            "  {:.1}% ({} samples) {}",
            h.percent, h.samples, h.comm
        )?;
        for f in &h.frames {
            writeln!(out, "      {}", f.replace("_[k]", " [k]"))?;
        }
    }
    writeln!(out)?;
    for t in &s.truncated {
        writeln!(
            out,
            "Note: {:.0}% of {}'s user stacks are only 1-2 frames deep: the binary was likely \
             built without frame pointers, so callers are missing. Rebuild it with \
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

/// Samples, losses, the tier, and the probe effect.
pub fn footer(out: &mut impl Write, p: &Profile) -> anyhow::Result<()> {
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
    writeln!(
        out,
        "Tier: perf_event_open, {} at {} Hz with frame-pointer callchains{}",
        p.event,
        p.freq_hz,
        p.event_note
            .as_deref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default()
    )?;
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

fn pct(a: f64, b: f64) -> f64 {
    if b > 0.0 { 100.0 * a / b } else { 0.0 }
}
