//! iosnoop's output: one line per request (streamed, so fixed widths like the
//! original), per-process totals, the I/O pattern, and biolatency-style
//! log2 histograms.

use std::io::{self, Write};

use crate::analysis::io_pattern::{IoPattern, Log2Hist, ProcessIo, human_bytes, slot_range};
use crate::model::block::BlockIo;
use crate::render::table::{Align, Table};

/// Which optional columns to print.
#[derive(Debug, Clone, Copy, Default)]
pub struct Columns {
    /// -s: STARTs, seconds since tracing began.
    pub start: bool,
    /// -t: ENDs.
    pub end: bool,
    /// -Q: latency includes queueing; add QUEms, the part spent queued.
    pub queued: bool,
}

pub fn header(c: Columns) -> String {
    let mut s = String::new();
    if c.start {
        s.push_str(&format!("{:<14} ", "STARTs"));
    }
    if c.end {
        s.push_str(&format!("{:<14} ", "ENDs"));
    }
    s.push_str(&format!(
        "{:<16} {:>7} {:<4} {:<12} {:>12} {:>8} ",
        "COMM", "PID", "TYPE", "DEV", "BLOCK", "BYTES"
    ));
    if c.queued {
        s.push_str(&format!("{:>8} ", "QUEms"));
    }
    s.push_str(&format!("{:>8} {}", "LATms", "ISSUER"));
    s.trim_end().to_string()
}

/// One request as a line; `t0` is the trace's start (CLOCK_MONOTONIC ns).
pub fn row(io: &BlockIo, c: Columns, t0: u64) -> String {
    let mut v = Vec::new();
    write_row(&mut v, io, c, t0).expect("writing to a Vec");
    String::from_utf8(v).expect("UTF-8").trim_end().to_string()
}

/// `row` straight into `out` with its newline: no intermediate strings, as
/// this runs for every request at tens of thousands per second.
pub fn write_row(out: &mut impl Write, io: &BlockIo, c: Columns, t0: u64) -> io::Result<()> {
    let secs = |ns: u64| ns.saturating_sub(t0) as f64 / 1e9;
    if c.start {
        write!(out, "{:<14.6} ", secs(io.start_ns))?;
    }
    if c.end {
        write!(out, "{:<14.6} ", secs(io.end_ns))?;
    }
    write!(out, "{:<16} {:>7} {:<4} ", io.comm, io.pid, io.rwbs)?;
    // DEV: "254,0 vda" padded to 12.
    let dev_len = {
        let d = io.dev;
        let digits = |n: u32| n.checked_ilog10().unwrap_or(0) as usize + 1;
        let name = if io.disk.is_empty() {
            0
        } else {
            io.disk.len() + 1
        };
        write!(out, "{d}")?;
        if !io.disk.is_empty() {
            write!(out, " {}", io.disk)?;
        }
        digits(d.major) + 1 + digits(d.minor) + name
    };
    write!(
        out,
        "{:pad$} {:>12} {:>8} ",
        "",
        io.sector,
        io.bytes,
        pad = 12usize.saturating_sub(dev_len)
    )?;
    if c.queued {
        match io.queue_ns {
            Some(q) => write!(out, "{:>8.2} ", q as f64 / 1e6)?,
            None => write!(out, "{:>8} ", "-")?,
        }
    }
    write!(out, "{:>8.2}", io.latency_ns as f64 / 1e6)?;
    match &io.issuer {
        Some(t) => writeln!(out, " {}({})", t.comm, t.pid),
        None => writeln!(out),
    }
}

/// Per-process totals as a table.
pub fn summary(out: &mut impl Write, procs: &[ProcessIo]) -> io::Result<()> {
    let mut t = Table::new([
        ("PID", Align::Right),
        ("COMM", Align::Left),
        ("REQS", Align::Right),
        ("BYTES", Align::Right),
        ("READS", Align::Right),
        ("WRITES", Align::Right),
        ("AVGms", Align::Right),
        ("P50ms", Align::Right),
        ("P99ms", Align::Right),
    ]);
    for p in procs {
        t.push(vec![
            p.pid.to_string(),
            p.comm.clone(),
            p.totals.requests.to_string(),
            human_bytes(p.totals.bytes),
            format!("{} ({})", p.totals.reads, human_bytes(p.totals.read_bytes)),
            format!(
                "{} ({})",
                p.totals.writes,
                human_bytes(p.totals.write_bytes)
            ),
            format!("{:.2}", p.avg_ms),
            format!("{:.2}", p.p50_ms),
            format!("{:.2}", p.p99_ms),
        ]);
    }
    t.write(out)
}

/// The I/O pattern in a few sentences.
pub fn pattern(out: &mut impl Write, p: &IoPattern) -> io::Result<()> {
    let t = &p.totals;
    if t.requests == 0 {
        return writeln!(out, "No block requests completed.");
    }
    let pct = |f: f64| format!("{:.0}%", f * 100.0);
    writeln!(
        out,
        "{} requests, {}: {} reads ({}), {} writes ({})",
        t.requests,
        human_bytes(t.bytes),
        t.reads,
        human_bytes(t.read_bytes),
        t.writes,
        human_bytes(t.write_bytes)
    )?;
    if p.sequential + p.random > 0 {
        writeln!(
            out,
            "Access: {} sequential, {} random (per process, device and direction)",
            pct(p.sequential_share),
            pct(1.0 - p.sequential_share)
        )?;
    }
    let sizes: Vec<String> = p
        .common_sizes
        .iter()
        .map(|s| format!("{} x{}", s.bytes, s.count))
        .collect();
    writeln!(out, "Common request sizes (bytes): {}", sizes.join(", "))?;
    writeln!(
        out,
        "Flags: sync {}, FUA {}, preflush {}, metadata {}, readahead {}",
        pct(p.sync_share),
        pct(p.fua_share),
        pct(p.preflush_share),
        pct(p.meta_share),
        pct(p.readahead_share)
    )?;
    for r in &p.repeated_ranges {
        writeln!(out, "Repeated: {}", r.describe())?;
    }
    Ok(())
}

/// Histograms like biolatency: `usecs : count distribution`, 40-star bars.
pub fn histograms(out: &mut impl Write, hists: &[Log2Hist]) -> io::Result<()> {
    for h in hists {
        let name = if h.disk.is_empty() {
            String::new()
        } else {
            format!(" {}", h.disk)
        };
        match &h.rwbs {
            Some(t) => writeln!(out, "\ndisk = {}{name}, type = {t}", h.dev)?,
            None => writeln!(out, "\ndisk = {}{name}", h.dev)?,
        }
        writeln!(out, "     usecs              : count    distribution")?;
        let max = h.counts.iter().copied().max().unwrap_or(0).max(1);
        let first = h.counts.iter().position(|&c| c > 0).unwrap_or(0);
        for (slot, &count) in h.counts.iter().enumerate().skip(first) {
            let (lo, hi) = slot_range(slot as u32);
            let stars = (count * 40).div_ceil(max) as usize;
            writeln!(
                out,
                "{:>10} -> {:<10}: {:<8} |{:<40}|",
                lo,
                hi,
                count,
                "*".repeat(stars.min(40))
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::block::{DevId, Task};

    fn io() -> BlockIo {
        BlockIo {
            comm: "io-app".into(),
            pid: 889,
            tid: 889,
            issuer: Some(Task {
                pid: 120,
                tid: 120,
                comm: "kworker/0:1H".into(),
            }),
            rwbs: "WS".into(),
            dev: DevId::new(254, 0),
            disk: "vda".into(),
            sector: 4800512,
            bytes: 1310720,
            start_ns: 2_000_000_000,
            issue_ns: 2_000_000_000,
            end_ns: 2_002_100_000,
            queue_ns: None,
            latency_ns: 2_100_000,
            error: 0,
        }
    }

    #[test]
    fn rows_like_iosnoop() {
        let c = Columns {
            start: true,
            ..Default::default()
        };
        assert_eq!(
            header(c),
            "STARTs         COMM                 PID TYPE DEV                 BLOCK    BYTES    LATms ISSUER"
        );
        assert_eq!(
            row(&io(), c, 1_000_000_000),
            "1.000000       io-app               889 WS   254,0 vda         4800512  1310720     2.10 kworker/0:1H(120)"
        );
    }

    #[test]
    fn queue_column_with_q() {
        let c = Columns {
            queued: true,
            ..Default::default()
        };
        assert!(
            header(c).contains(" BYTES    QUEms    LATms"),
            "{}",
            header(c)
        );
        let mut q = io();
        q.queue_ns = Some(250_000);
        assert!(
            row(&q, c, 0).contains(" 1310720     0.25     2.10 "),
            "{}",
            row(&q, c, 0)
        );
        q.queue_ns = None;
        assert!(
            row(&q, c, 0).contains(" 1310720        -     2.10 "),
            "{}",
            row(&q, c, 0)
        );
    }

    #[test]
    fn histogram_bars() {
        let h = Log2Hist {
            dev: DevId::new(254, 0),
            disk: "vda".into(),
            rwbs: None,
            counts: vec![0, 0, 0, 0, 2, 4],
        };
        let mut out = Vec::new();
        histograms(&mut out, &[h]).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("disk = 254,0 vda"), "{text}");
        assert!(
            text.contains(
                "        16 -> 31        : 2        |********************                    |"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "        32 -> 63        : 4        |****************************************|"
            ),
            "{text}"
        );
        assert!(
            !text.contains(" 0 -> 1 "),
            "leading empty slots are skipped: {text}"
        );
    }
}
