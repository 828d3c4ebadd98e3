//! Turning model and analysis results into text tables, JSON, folded stacks,
//! SVG flame graphs, pprof and speedscope files.

pub mod diagnose;
pub mod doctor;
pub mod drill;
pub mod elf;
pub mod exec;
pub mod files;
pub mod flamegraph;
pub mod grade_summary;
pub mod html;
pub mod iosnoop;
pub mod metrics;
pub mod offcpu;
pub mod otlp;
pub mod otlp_profiles;
pub mod pprof;
pub mod profile;
pub mod prometheus;
pub mod protobuf;
pub mod ps;
pub mod pyroscope;
pub mod speedscope;
pub mod svg_chart;
pub mod syscalls;
pub mod table;
pub mod time;
pub mod verdict;
pub mod wall;
pub mod wall_html;

use std::io::Write;

/// Write `value` as pretty JSON followed by a newline: the `--json` output of
/// every command.
pub fn json<T: serde::Serialize>(out: &mut impl Write, value: &T) -> anyhow::Result<()> {
    // Buffered: stdout is line-buffered, and pretty JSON is one write per
    // line otherwise (a 100k-sample profile: 2 s of pipe writes).
    let mut buf = std::io::BufWriter::with_capacity(1 << 16, &mut *out);
    serde_json::to_writer_pretty(&mut buf, value)?;
    writeln!(buf)?;
    buf.flush()?;
    Ok(())
}

/// A word as a title or sentence starts with it: `page-faults` is
/// `Page-faults`.
pub fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}
