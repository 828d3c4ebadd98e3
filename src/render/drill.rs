//! diagnose's drill-downs beyond the profiles, compactly for the report's
//! why section: the block I/O (iosnoop's summary), the competition for
//! the CPUs, and the failed execs (exec-trace's explanation).

use std::io::{self, Write};

use crate::analysis::io_pattern::{human_bytes, slot_range};
use crate::model::drill::{Competition, ExecDrill, StorageDrill};

/// Storage: who submits, the pattern, sizes, the latency histogram.
pub fn storage(out: &mut impl Write, s: &StorageDrill) -> io::Result<()> {
    writeln!(
        out,
        "  Storage ({} tier): {} requests, {}: {} reads ({}), {} writes ({}); {:.0}% sequential, sync {:.0}%{}",
        s.tier,
        s.requests,
        human_bytes(s.bytes),
        s.reads,
        human_bytes(s.read_bytes),
        s.writes,
        human_bytes(s.write_bytes),
        s.sequential_share * 100.0,
        s.sync_share * 100.0,
        if s.lost > 0 {
            format!(" ({} events lost)", s.lost)
        } else {
            String::new()
        }
    )?;
    if s.requests > 0 {
        let types: Vec<String> = s
            .types
            .iter()
            .take(5)
            .map(|t| format!("{} x{}", t.name, t.count))
            .collect();
        let sizes: Vec<String> = s
            .sizes
            .iter()
            .map(|c| format!("{} x{}", human_bytes(c.bytes), c.count))
            .collect();
        writeln!(
            out,
            "    types {}; sizes {}",
            types.join(", "),
            sizes.join(", ")
        )?;
    }
    for p in s.submitters.iter().take(5) {
        let who = match &p.kernel {
            Some(kind) => format!(
                "{} ({}, {kind}: writes for every process on the disk)",
                p.comm, p.pid
            ),
            None => format!("{} ({})", p.comm, p.pid),
        };
        let issued: Vec<String> = p
            .issued_by
            .iter()
            .take(2)
            .map(|t| format!("{} by {}", t.count, t.name))
            .collect();
        writeln!(
            out,
            "    submits: {who}: {} requests, {}{}",
            p.requests,
            human_bytes(p.bytes),
            if issued.is_empty() {
                String::new()
            } else {
                format!(" (issued to the device {})", issued.join(", "))
            }
        )?;
    }
    if s.requests > 0 {
        let buckets: Vec<String> = s
            .latency_us
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(slot, c)| {
                let (lo, hi) = slot_range(slot as u32);
                format!("{lo}-{hi} µs: {c}")
            })
            .collect();
        writeln!(
            out,
            "    latency p50 {:.2} ms, p99 {:.2} ms; {}",
            s.p50_ms,
            s.p99_ms,
            buckets.join(", ")
        )?;
    }
    for r in s.repeated.iter().take(3) {
        writeln!(out, "    repeated: {}", r.text)?;
    }
    Ok(())
}

/// Waiting for a CPU: the target's share and the processes that had the
/// CPUs.
pub fn competition(out: &mut impl Write, c: &Competition) -> io::Result<()> {
    writeln!(
        out,
        "  CPU competition: it had {:.0}% of a CPU (may run on CPUs {}); all processes {:.0}% of {} CPU{}",
        c.target_percent,
        c.target_cpus,
        c.total_percent,
        c.cpus,
        if c.cpus == 1 { "" } else { "s" }
    )?;
    for o in c.others.iter().take(5) {
        writeln!(
            out,
            "    {:5.1}% {} ({}){}",
            o.cpu_percent,
            o.comm,
            o.pid,
            o.cpus
                .as_ref()
                .map_or(String::new(), |l| format!(", on CPUs {l}"))
        )?;
    }
    Ok(())
}

/// Failed execs, each as exec-trace explains it; with none, the count.
pub fn exec(out: &mut impl Write, e: &ExecDrill) -> io::Result<()> {
    if e.failures.is_empty() {
        return writeln!(
            out,
            "  Execs ({} tier): {} seen, none failed",
            e.tier, e.execs
        );
    }
    let failed: u64 = e.failures.iter().map(|f| f.times).sum();
    writeln!(
        out,
        "  Exec failures ({} tier, as kdiag exec-trace explains them): {failed} of {} execs failed",
        e.tier, e.execs
    )?;
    for f in &e.failures {
        let times = if f.times > 1 {
            format!("{} times, last ", f.times)
        } else {
            String::new()
        };
        writeln!(out, "    {times}PID {}: {}", f.pid, f.text)?;
    }
    Ok(())
}
