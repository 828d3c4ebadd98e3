//! `kdiag iosnoop`: one line per block I/O request with its latency, like
//! perf-tools iosnoop; --hist (biolatency), --summary (per process) and the
//! I/O pattern at the end.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use crate::analysis::io_filter::IoFilter;
use crate::analysis::io_pattern::{self, IoPattern, Log2Hist, ProcessIo};
use crate::instruments::block::{self, Options};
use crate::instruments::target::{self, Interrupt};
use crate::instruments::{Ask, Tier};
use crate::model::block::{BlockIo, LatencyCount};
use crate::render::iosnoop::{self as view, Columns};

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    sudo kdiag iosnoop 5                     trace for 5 seconds (or -d 5)\n  \
    sudo kdiag iosnoop --device vda -i '*W*' writes to vda until Ctrl-C\n  \
    sudo kdiag iosnoop --hist 10         latency histogram per device\n  \
    sudo kdiag iosnoop --summary -n dd   per-process totals for dd")]
pub struct Args {
    /// Only this device: a name (vda, /dev/vda) or major,minor (254,0)
    #[arg(long = "device", value_name = "DEV")]
    pub device: Option<String>,
    /// Only these request types: an rwbs pattern such as '*R*' or 'WS'
    #[arg(short = 'i', long = "type", value_name = "TYPE", value_parser = super::args::rwbs)]
    pub io_type: Option<String>,
    /// Only requests caused or issued by this process
    #[arg(short = 'p', long, conflicts_with = "name", value_parser = super::args::pid::<u32>)]
    pub pid: Option<u32>,
    /// Only requests caused or issued by processes whose name contains NAME
    #[arg(short = 'n', long)]
    pub name: Option<String>,
    /// Count latency from queueing (insertion) instead of issue to the device
    #[arg(short = 'Q', long)]
    pub queued: bool,
    /// Add a STARTs column (seconds since tracing began)
    #[arg(short = 's', long = "start")]
    pub start: bool,
    /// Add an ENDs column
    #[arg(short = 't', long = "end")]
    pub end: bool,
    /// Print log2 latency histograms per device instead of requests
    #[arg(long)]
    pub hist: bool,
    /// With --hist: one histogram per device and request type
    #[arg(long, requires = "hist")]
    pub by_type: bool,
    /// Print per-process totals and the I/O pattern instead of requests
    #[arg(long)]
    pub summary: bool,
    /// Print everything as one JSON document at the end
    #[arg(long)]
    pub json: bool,
    /// Which tracing tier to use
    #[arg(long, default_value = "auto",
          value_parser = super::args::tier(&crate::instruments::block::TIERS))]
    pub tier: Ask,
    #[command(flatten)]
    pub duration: super::args::TraceDuration,
}

/// Requests kept for the summary, pattern and JSON at the end: about 75 MB
/// (a request with its names is ~300 bytes). Beyond it requests are still
/// printed and counted, so a storm cannot grow kdiag without bound.
const MAX_KEPT: usize = 250_000;

/// The --json document.
#[derive(Serialize)]
struct Report {
    tier: Tier,
    duration_s: f64,
    lost_events: u64,
    /// Completions the kernel had but never delivered (its notes say why).
    unseen_completions: u64,
    requests: Vec<BlockIo>,
    processes: Vec<ProcessIo>,
    pattern: IoPattern,
    #[serde(skip_serializing_if = "Option::is_none")]
    histograms: Option<Vec<Log2Hist>>,
}

/// The checks on the arguments as a whole (values are checked when parsed):
/// the device must exist.
pub fn validate(args: &Args) -> anyhow::Result<()> {
    if let Some(spec) = &args.device {
        block::device(spec).map_err(|e| crate::error::usage(format!("{e:#}")))?;
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    validate(&args)?;
    let duration = args.duration.secs();
    let mut filter = IoFilter {
        rwbs: args.io_type.clone(),
        pid: args.pid,
        name: args.name.clone(),
        ..Default::default()
    };
    if let Some(spec) = &args.device {
        let dev = block::device(spec)?;
        if let Some(part) = &dev.partition {
            eprintln!(
                "Note: block tracepoints report the whole disk; tracing {} ({}), which holds {part}.",
                dev.name, dev.dev
            );
        }
        filter.dev = Some(dev.dev);
    }
    if let Some(pid) = args.pid {
        target::check_pids(&[pid as i32])?;
    }
    // A learner's own requests, on a course server: filtered in the kernel.
    let scope = super::args::scope()?;
    let options = Options {
        dev: filter.dev,
        queued: args.queued,
        hist_only: args.hist,
        uid: scope.uid(),
    };
    let (mut source, fallback) = block::open(args.tier, options)?;
    // Ctrl-C or SIGTERM is how iosnoop ends: exit 0, as perf-tools' iosnoop
    // (no `Trace`: its rows stream out as they come).
    let stop = Interrupt::catch_only(&[libc::SIGINT, libc::SIGTERM])
        .context("installing the Ctrl-C handler")?
        .stop_flag();
    if let Some(why) = fallback {
        eprintln!("{}", why.note());
    }
    let tier_line = match source.tier() {
        Tier::Bpf => "BPF tier: requests followed by their kernel pointer",
        _ => "perf tier: latencies matched by (dev, sector); merges may skew",
    };
    let whose = match scope.uid() {
        Some(_) => format!(" caused by {}", scope.describe("")),
        None => String::new(),
    };
    eprintln!(
        "Tracing block I/O{whose} ({tier_line}). {}",
        until(duration)
    );

    let columns = Columns {
        start: args.start,
        end: args.end,
        queued: args.queued,
    };
    let live = !args.json && !args.hist && !args.summary;
    let t0 = target::now_ns();
    let began = Instant::now();
    let deadline = duration.map(|d| began + Duration::from_secs_f64(d));
    let mut kept: Vec<BlockIo> = Vec::new();
    let mut unkept = 0u64;
    let mut batch = Vec::new();
    let stdout = std::io::stdout();
    // Rows are written a batch (one poll, ~100 ms) at a time: one write per
    // batch instead of one per row keeps tracing overhead low at high IOPS.
    let mut out = std::io::BufWriter::new(stdout.lock());
    if live {
        writeln!(out, "{}", view::header(columns))?;
        out.flush()?;
    }
    loop {
        let last = stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d);
        if !last {
            let wait = deadline.map_or(Duration::from_millis(100), |d| {
                d.saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(100))
            });
            source.poll(wait, &mut batch)?;
        } else {
            source.finish(&mut batch)?;
        }
        for io in batch.drain(..).filter(|io| filter.matches(io)) {
            if live {
                let _ = view::write_row(&mut out, &io, columns, t0);
            }
            if kept.len() < MAX_KEPT {
                kept.push(io);
            } else {
                unkept += 1;
            }
        }
        if out.flush().is_err() {
            // stdout closed (a pipe into `head`): stop quietly.
            stop.store(true, Ordering::Relaxed);
        }
        if last {
            break;
        }
    }
    drop(out);
    let elapsed = began.elapsed().as_secs_f64();
    let lost = source.lost();
    let unseen = source.unseen();
    let tier = source.tier();
    for note in source.notes() {
        eprintln!("{note}");
    }
    let counts: Option<Vec<LatencyCount>> = match args.hist {
        true => Some(match source.hist()? {
            Some(kernel) => kernel,
            None => io_pattern::latency_counts(&kept),
        }),
        false => None,
    };
    // Tracing state is released here, before the output is written.
    drop(source);
    let histograms = counts.map(|c| {
        let c: Vec<LatencyCount> = c.into_iter().filter(|c| filter.matches_count(c)).collect();
        io_pattern::histograms(&c, args.by_type)
    });
    let pattern = io_pattern::pattern(&kept);
    let processes = io_pattern::per_process(&kept);
    let footer = format!(
        "Traced {} requests in {elapsed:.1} s with the {} tier; {lost} events lost{}.",
        histograms.as_ref().map_or(kept.len() as u64 + unkept, |h| h
            .iter()
            .map(Log2Hist::total)
            .sum()),
        if tier == Tier::Bpf { "BPF" } else { "perf" },
        if lost > 0 {
            " (the ring buffer was full: latencies of those requests are missing)"
        } else {
            ""
        }
    );
    let footer = if unkept > 0 {
        format!(
            "{footer}\nThe summary covers the first {MAX_KEPT} requests; {unkept} more were printed only."
        )
    } else {
        footer
    };
    let mut out = stdout.lock();
    if args.json {
        let report = Report {
            tier,
            duration_s: elapsed,
            lost_events: lost,
            unseen_completions: unseen,
            requests: kept,
            processes,
            pattern,
            histograms,
        };
        crate::render::json(&mut out, &report)?;
        eprintln!("{footer}");
        return Ok(crate::error::OK);
    }
    if let Some(h) = &histograms {
        view::histograms(&mut out, h)?;
    } else if args.summary {
        view::summary(&mut out, &processes)?;
        writeln!(out)?;
        view::pattern(&mut out, &pattern)?;
    } else {
        let mut err = std::io::stderr().lock();
        writeln!(err)?;
        view::pattern(&mut err, &pattern)?;
    }
    eprintln!("{footer}");
    Ok(crate::error::OK)
}

fn until(duration: Option<f64>) -> String {
    match duration {
        Some(d) => format!("Tracing for {d} s."),
        None => "Ctrl-C to end.".to_string(),
    }
}
