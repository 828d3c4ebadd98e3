//! `kdiag diagnose`'s report: the verdict first, then the numbers behind
//! it, what to run next, and what watching cost.

use std::io::{self, Write};

use crate::analysis::trend::{about, slope_text, value_text};
use crate::model::diagnosis::{BpfCost, BpfStats, Observation, SCHEMA_VERSION, Scope};
use crate::model::drill::Why;
use crate::model::trend::{Limit, SeriesShape, Shape, Shapes};
use crate::model::verdict::Diagnosis;
use crate::render::offcpu::{duration as offcpu_duration, one_line};
use crate::render::verdict;

/// The text report. Its names come from other processes (comm, argv,
/// paths): every control character but the line breaks is escaped, here
/// once for all of them.
pub fn report(
    out: &mut impl Write,
    o: &Observation,
    d: &Diagnosis,
    why: Option<&Why>,
) -> io::Result<()> {
    let mut text = Vec::new();
    report_raw(&mut text, o, d, why)?;
    let text = String::from_utf8_lossy(&text);
    out.write_all(crate::analysis::ps::printable_lines(&text).as_bytes())
}

fn report_raw(
    out: &mut impl Write,
    o: &Observation,
    d: &Diagnosis,
    why: Option<&Why>,
) -> io::Result<()> {
    writeln!(
        out,
        "Verdict: {}: {}",
        d.verdict.name(),
        verdict::summary(d)
    )?;
    let others = o.members.len().saturating_sub(1);
    let what = match (o.scope, others) {
        (Scope::Process, _) => format!("PID {} ({})", o.pid, o.comm),
        (Scope::Cgroup, _) => format!(
            "cgroup {}: {} process{}, PID {} ({}) first",
            o.cgroup.as_deref().unwrap_or("?"),
            o.members.len(),
            if o.members.len() == 1 { "" } else { "es" },
            o.pid,
            o.comm
        ),
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
    for e in verdict::evidence(d) {
        writeln!(out, "  {e}")?;
    }
    if let Some(w) = why {
        why_section(out, w)?;
    }
    trend_section(out, &d.trend, o.trend.interval_s, &o.trend.notes)?;
    if !d.next.is_empty() {
        let drilled = why.is_some_and(Why::found_any);
        let heading = if drilled {
            "To look further"
        } else {
            "Next, for the why"
        };
        writeln!(out, "\n{heading}:")?;
        for n in &d.next {
            writeln!(out, "  {n}")?;
        }
    }
    writeln!(out, "\n{}", cost_line(o))
}

/// "kdiag's own cost: 12 ms of CPU in 5.0 s (0.24% of one CPU) watching,
/// 180 ms in all (...), 4.1 MiB peak RSS; ...".
pub fn cost_line(o: &Observation) -> String {
    format!(
        "kdiag's own cost: {:.0} ms of CPU in {:.1} s ({:.2}% of one CPU){}, {:.1} MiB peak RSS{}; \
         {} samples of up to {} thread{} every {} ms",
        o.cost.cpu_s * 1e3,
        o.window_s,
        o.cost.cpu_s * 100.0 / o.window_s.max(1e-3),
        o.cost.run_cpu_s.map_or(String::new(), |c| format!(
            " watching, {:.0} ms in all (start, drill-downs, exec trace)",
            c * 1e3
        )),
        o.cost.max_rss_kib as f64 / 1024.0,
        o.cost.bpf.as_ref().map_or(String::new(), bpf_cost),
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

/// ", 4 BPF programs loaded with 3.2 MiB of maps (0.8 ms in them over
/// 1200 runs, run-time statistics turned on for the run)".
fn bpf_cost(b: &BpfCost) -> String {
    if b.programs == 0 {
        return ", no BPF program".into();
    }
    let programs = format!(
        ", {} BPF program{} loaded{}",
        b.programs,
        if b.programs == 1 { "" } else { "s" },
        if b.map_bytes > 0 {
            format!(
                " with {:.1} MiB of maps",
                b.map_bytes as f64 / (1024.0 * 1024.0)
            )
        } else {
            String::new()
        }
    );
    let how = match b.stats {
        BpfStats::AlreadyOn => "kernel.bpf_stats_enabled on",
        BpfStats::TurnedOn => "run-time statistics turned on for the run",
        BpfStats::Unavailable => {
            return format!(
                "{programs} (their run time unknown: the kernel's run-time statistics could not be turned on)"
            );
        }
    };
    format!(
        "{programs} ({:.1} ms in them over {} runs, {how})",
        b.run_time_ns.unwrap_or(0) as f64 / 1e6,
        b.runs.unwrap_or(0)
    )
}

/// The JSON document: `{"version", "observation", "diagnosis"}`.
pub fn json(
    out: &mut impl Write,
    o: &Observation,
    d: &Diagnosis,
    why: Option<&Why>,
) -> anyhow::Result<()> {
    crate::render::json(
        out,
        &serde_json::json!({
            "version": SCHEMA_VERSION, "observation": o, "diagnosis": d, "why": why
        }),
    )
}

/// The JSON document when the command could not run: no observation nor
/// diagnosis, the exec drill-down's explanation.
pub fn json_exec_failure(
    out: &mut impl Write,
    e: &crate::model::drill::ExecDrill,
) -> anyhow::Result<()> {
    crate::render::json(
        out,
        &serde_json::json!({
            "version": SCHEMA_VERSION, "observation": null, "diagnosis": null,
            "why": { "exec": e }
        }),
    )
}

/// The three largest of `lines` (share, stack as one line), in order, with
/// stacks that read the same once shortened (runtime and scheduler frames
/// left out) as one, and none that rounds to 0.0%.
fn stack_lines(lines: impl Iterator<Item = (f64, String)>) -> Vec<(f64, String)> {
    let mut out: Vec<(f64, String)> = Vec::new();
    for (percent, line) in lines {
        match out.iter_mut().find(|(_, l)| *l == line) {
            Some(seen) => seen.0 += percent,
            None => out.push((percent, line)),
        }
    }
    out.retain(|(p, _)| *p >= 0.05);
    out.sort_by(|a, b| b.0.total_cmp(&a.0));
    out.truncate(3);
    out
}

/// The drill-downs' heading: how long each ran and, when they ran after
/// the watch window (what ended with it is missing from them), when.
pub fn why_heading(w: &Why) -> String {
    let each = if w.window_s > 0.0 {
        format!(", {:.1} s each", w.window_s)
    } else {
        String::new()
    };
    match w.after_window {
        Some((end, from)) => format!(
            "Why (drill-down{each}, taken after the watch window: from {from:.1} s to {:.1} s, \
             the window ended at {end:.1} s)",
            from + w.window_s
        ),
        None => format!("Why (drill-down{each})"),
    }
}

/// The CPU profile's hottest function, or that none had samples enough.
pub fn hottest(w: &Why, cpu: &crate::model::profile::Summary) -> String {
    match (w.hot_function(), cpu.top_self.first()) {
        (Some(f), _) => format!("hottest function: {f}"),
        (None, Some(_)) => format!(
            "no function had {} samples, too few to name the hottest",
            crate::model::drill::HOT_MIN_SAMPLES
        ),
        (None, None) => "hottest function: none seen".into(),
    }
}

/// The drill-down's findings: the CPU profile's hot function and stacks,
/// the off-CPU profile's wait points and blocking paths.
fn why_section(out: &mut impl Write, w: &Why) -> io::Result<()> {
    writeln!(out, "\n{}:", why_heading(w))?;
    if let Some(cpu) = &w.cpu {
        writeln!(
            out,
            "  On the CPU: {} samples, {:.0}% in the kernel; {}",
            cpu.samples,
            cpu.kernel_percent,
            hottest(w, cpu)
        )?;
        let lines = cpu.hottest.iter().map(|s| (s.percent, one_line(&s.frames)));
        for (percent, line) in stack_lines(lines) {
            writeln!(out, "    {percent:5.1}% {line}")?;
        }
    }
    if let Some(off) = &w.offcpu {
        writeln!(
            out,
            "  Off the CPU: {} blocked in {} blocks, summed over threads",
            offcpu_duration(off.total_ns),
            off.blocks
        )?;
        for p in off.wait_points.iter().filter(|p| p.percent >= 0.5).take(3) {
            writeln!(
                out,
                "    waits in {} ({}): {:.1}%",
                p.function,
                p.state.letter(),
                p.percent
            )?;
        }
        let lines = off.paths.iter().map(|p| (p.percent, one_line(&p.frames)));
        for (percent, line) in stack_lines(lines) {
            writeln!(out, "    {percent:5.1}% {line}")?;
        }
    }
    if let Some(s) = &w.storage {
        crate::render::drill::storage(out, s)?;
    }
    if let Some(c) = &w.competition {
        crate::render::drill::competition(out, c)?;
    }
    if let Some(e) = &w.exec {
        crate::render::drill::exec(out, e)?;
    }
    for a in &w.perf_maps {
        crate::render::drill::perf_map(out, a)?;
    }
    for p in &w.python {
        crate::render::drill::python(out, p)?;
    }
    for u in &w.unnamed {
        crate::render::drill::unnamed(out, u, &w.perf_maps)?;
    }
    for s in &w.skipped {
        writeln!(out, "  Not run: {s}")?;
    }
    Ok(())
}

/// What each time series did: one line per series that is not steady,
/// then the steady ones in one list, then what could not be kept.
fn trend_section(
    out: &mut impl Write,
    t: &Shapes,
    interval_s: f64,
    notes: &[String],
) -> io::Result<()> {
    if let Some(n) = t.too_few_points {
        if n > 0 {
            writeln!(
                out,
                "\nTrend: too few points ({n}, one every {interval_s} s) to say: \
                 watch longer, or give a shorter --interval"
            )?;
        }
        return Ok(());
    }
    if t.series.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nTrend (a point every {interval_s} s):")?;
    let mut steady = Vec::new();
    for s in &t.series {
        match &s.shape {
            Shape::Steady { mean } => {
                steady.push(format!("{} {}", s.name, value_text(*mean, &s.unit)))
            }
            _ => writeln!(
                out,
                "  {}: {}",
                s.name,
                shape_text(s, t.memory_limit.as_ref())
            )?,
        }
    }
    if !steady.is_empty() {
        writeln!(out, "  Steady: {}", steady.join(", "))?;
    }
    for n in notes {
        writeln!(out, "  Note: {n}")?;
    }
    Ok(())
}

/// What the trend says of one series, in a line: the report's trend
/// section and the HTML charts' captions.
pub fn shape_text(s: &SeriesShape, limit: Option<&Limit>) -> String {
    let v = |x: f64| value_text(x, &s.unit);
    match &s.shape {
        Shape::Steady { mean } => format!("steady, {}", v(*mean)),
        Shape::Growing {
            slope,
            fit,
            reaches_limit_s,
        } => {
            let mut line = format!(
                "{} {}",
                if *slope < 0.0 { "shrinking" } else { "growing" },
                slope_text(*slope, &s.unit)
            );
            line.push_str(&format!(" (a line fits: r² {fit:.2})"));
            if let (Some(secs), Some(l)) = (reaches_limit_s, limit) {
                line.push_str(&format!(", reaches {} in {}", l.what, about(*secs)));
            }
            line
        }
        Shape::Periodic {
            period_s,
            duty,
            low,
            high,
            ..
        } => format!(
            "periodic, every {period_s:.2} s, high {:.0}% of the time ({} to {})",
            duty * 100.0,
            v(*low),
            v(*high)
        ),
        Shape::Change {
            at_s,
            before,
            after,
        } => format!(
            "one-off change at {at_s:.1} s: {} -> {}",
            v(*before),
            v(*after)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::{BpfCost, BpfStats, bpf_cost, stack_lines};

    #[test]
    fn the_bpf_cost_names_the_maps_memory() {
        let b = BpfCost {
            programs: 4,
            run_time_ns: Some(800_000),
            runs: Some(1200),
            stats: BpfStats::TurnedOn,
            map_bytes: 33 << 19,
        };
        assert_eq!(
            bpf_cost(&b),
            ", 4 BPF programs loaded with 16.5 MiB of maps (0.8 ms in them over 1200 runs, \
             run-time statistics turned on for the run)"
        );
        // A record made before the maps were counted says nothing of them.
        let old = BpfCost { map_bytes: 0, ..b };
        assert!(!bpf_cost(&old).contains("maps"), "{}", bpf_cost(&old));
    }

    #[test]
    fn a_stack_is_printed_once() {
        let line = |s: &str| s.to_string();
        let lines = [
            (99.96, line("main › pread › io_schedule")),
            (0.04, line("main › pread › io_schedule")),
            (0.01, line("main › nanosleep")),
        ];
        let got = stack_lines(lines.into_iter());
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].1, "main › pread › io_schedule");
        assert!((got[0].0 - 100.0).abs() < 1e-9, "{got:?}");
    }

    #[test]
    fn python_names_replace_the_interpreters_loop_as_the_hottest_function() {
        use crate::model::drill::{PyFunction, PythonStacks, Why};
        use crate::model::profile::{FunctionShare, Summary};
        let spin = PyFunction {
            name: "spin".into(),
            file: "<string>".into(),
            line: 2,
            samples: 27,
        };
        let mut w = Why {
            cpu: Some(Summary {
                samples: 200,
                kernel_percent: 0.0,
                top_self: vec![FunctionShare {
                    name: "_PyEval_EvalFrameDefault".into(),
                    kernel: false,
                    samples: 200,
                    percent: 100.0,
                }],
                top_total: Vec::new(),
                hottest: Vec::new(),
                truncated: Vec::new(),
            }),
            python: vec![PythonStacks {
                pid: 7,
                rounds: 30,
                hz: 10,
                threads_sampled: 30,
                samples: 30,
                functions: vec![spin.clone()],
                why_not: None,
            }],
            ..Default::default()
        };
        let cpu = w.cpu.clone().unwrap();
        let hot = super::hottest(&w, &cpu);
        assert_eq!(
            hot,
            "hottest function: spin (<string>:2) in Python (27 of 30 thread samples)"
        );
        let mut out = Vec::new();
        crate::render::drill::python(&mut out, &w.python[0]).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "  Python names: PID 7's stacks read from its memory 30 times (10 a second, never \
             stopped): 30 of 30 thread samples in Python; innermost: spin (<string>:2) 90%\n"
        );
        // Too few samples: the native profile's name stands.
        w.python[0].functions[0].samples = 9;
        let hot = super::hottest(&w, &cpu);
        assert_eq!(hot, "hottest function: _PyEval_EvalFrameDefault");
        w.python[0].why_not = Some("not named: CPython layout not recognised".into());
        let mut out = Vec::new();
        crate::render::drill::python(&mut out, &w.python[0]).unwrap();
        assert!(
            String::from_utf8(out)
                .unwrap()
                .ends_with("not read: not named: CPython layout not recognised\n")
        );
    }
}
