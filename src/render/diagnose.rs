//! `kdiag diagnose`'s report: the verdict first, then the numbers behind
//! it, what to run next, and what watching cost.

use std::io::{self, Write};

use crate::model::diagnosis::{Diagnosis, Observation, SCHEMA_VERSION, Scope};

pub fn report(out: &mut impl Write, o: &Observation, d: &Diagnosis) -> io::Result<()> {
    writeln!(out, "Verdict: {}: {}", d.verdict.name(), d.summary)?;
    let others = o.members.len().saturating_sub(1);
    let what = match (o.scope, others) {
        (Scope::Process, _) => format!("PID {} ({})", o.pid, o.comm),
        (_, 0) => format!("PID {} ({}), no other process in its tree", o.pid, o.comm),
        _ => format!(
            "PID {} ({}) and {others} process{} of its tree",
            o.pid,
            o.comm,
            if others == 1 { "" } else { "es" }
        ),
    };
    writeln!(
        out,
        "Confidence: {}. {what}, watched for {:.1} s\n",
        match d.confidence {
            crate::model::diagnosis::Confidence::High => "high",
            crate::model::diagnosis::Confidence::Medium => "medium",
            crate::model::diagnosis::Confidence::Low => "low",
        },
        o.window_s
    )?;
    writeln!(out, "Evidence:")?;
    for e in &d.evidence {
        writeln!(out, "  {e}")?;
    }
    if !d.next.is_empty() {
        writeln!(out, "\nNext, for the why:")?;
        for n in &d.next {
            writeln!(out, "  {n}")?;
        }
    }
    writeln!(out, "\n{}", cost_line(o))
}

/// "kdiag's own cost: 12 ms of CPU in 5.0 s (0.24% of one CPU), 4.1 MiB peak RSS".
pub fn cost_line(o: &Observation) -> String {
    format!(
        "kdiag's own cost: {:.0} ms of CPU in {:.1} s ({:.2}% of one CPU), {:.1} MiB peak RSS; \
         {} samples of up to {} thread{} every {} ms",
        o.cost.cpu_s * 1e3,
        o.window_s,
        o.cost.cpu_s * 100.0 / o.window_s.max(1e-3),
        o.cost.max_rss_kib as f64 / 1024.0,
        o.sampling.samples,
        o.sampling.threads_per_tick,
        if o.sampling.threads_per_tick == 1 {
            ""
        } else {
            "s"
        },
        o.sampling.interval_ms
    )
}

/// The JSON document: `{"version", "observation", "diagnosis"}`.
pub fn json(out: &mut impl Write, o: &Observation, d: &Diagnosis) -> anyhow::Result<()> {
    crate::render::json(
        out,
        &serde_json::json!({"version": SCHEMA_VERSION, "observation": o, "diagnosis": d}),
    )
}
