//! `kdiag syscalls`' report: one line per system call, most time first
//! (BPF) or most seen (/proc), and a footer saying how it was collected.

use std::io::Write;

use crate::model::capability::Tier;
use crate::model::syscalls::Syscalls;
use crate::render::offcpu::duration;
use crate::render::table::{Align, Table};

pub fn json(out: &mut impl Write, s: &Syscalls) -> anyhow::Result<()> {
    crate::render::json(out, s)
}

pub fn text(out: &mut impl Write, s: &Syscalls) -> anyhow::Result<()> {
    let counted: u64 = s.calls.iter().map(|c| c.count).sum();
    let timed = s.tier == Some(Tier::Bpf);
    writeln!(
        out,
        "System calls of {}, {:.2} s, started {}: {counted} {} of {} system call{}",
        s.target,
        s.cost.wall_secs,
        s.started,
        s.counts,
        s.calls.len(),
        if s.calls.len() == 1 { "" } else { "s" }
    )?;
    if let Some(why) = &s.ended_early {
        writeln!(
            out,
            "Note: {why}; the report covers what was collected until then."
        )?;
    }
    writeln!(out)?;
    let right = |n: &str| (n.to_string(), Align::Right);
    let mut t = match timed {
        true => Table::new([
            right("TOTAL"),
            right("CALLS"),
            right("ERRORS"),
            right("AVG"),
            right("MAX"),
            ("SYSCALL".into(), Align::Left),
        ]),
        false => Table::new([
            right("SAMPLES"),
            right("SHARE"),
            ("SYSCALL".into(), Align::Left),
        ]),
    };
    // Every sample, blocked in a call or not: what a call's share is of.
    let samples = counted + s.other;
    for c in &s.calls {
        let ns = c.total_ns.unwrap_or(0);
        let mut name = c.name.clone();
        if let Some(n) = c.in_progress.filter(|&n| n > 0) {
            name += &format!(" ({n} in progress at the end)");
        }
        t.push(match timed {
            // exit and exit_group never return: counted, never timed.
            true if c.timed == Some(0) => vec![
                "-".into(),
                c.count.to_string(),
                c.errors.unwrap_or(0).to_string(),
                "-".into(),
                "-".into(),
                name,
            ],
            true => vec![
                time(ns),
                c.count.to_string(),
                c.errors.unwrap_or(0).to_string(),
                time(ns / c.timed.unwrap_or(c.count).max(1)),
                time(c.max_ns.unwrap_or(0)),
                name,
            ],
            false => vec![
                c.count.to_string(),
                format!("{:.1}%", 100.0 * c.count as f64 / samples.max(1) as f64),
                name,
            ],
        });
    }
    t.write(out)?;
    writeln!(out)?;
    match timed {
        true if s.other > 0 => writeln!(
            out,
            "Other: {} calls numbered beyond the table, not shown",
            s.other
        )?,
        false => writeln!(
            out,
            "Other: {} samples of threads running or blocked outside any call",
            s.other
        )?,
        _ => {}
    }
    if s.untimed > 0 {
        writeln!(
            out,
            "Untimed: {} calls counted without their time (too many calls in progress at once)",
            s.untimed
        )?;
    }
    writeln!(out, "Tier: {}", s.collection)?;
    for note in &s.notes {
        writeln!(out, "Note: {note}")?;
    }
    let c = &s.cost;
    writeln!(
        out,
        "Probe effect: kdiag used {:.1} ms of CPU while tracing {:.2} s ({:.2}% of one CPU)",
        c.kdiag_cpu_secs * 1e3,
        c.wall_secs,
        100.0 * c.kdiag_cpu_secs / c.wall_secs.max(1e-9)
    )?;
    Ok(())
}

/// offcpu's durations, with a tenth of a microsecond below 10 us: most
/// calls take less than one.
fn time(ns: u64) -> String {
    match ns {
        0..10_000 => format!("{:.1} us", ns as f64 / 1e3),
        _ => duration(ns),
    }
}
