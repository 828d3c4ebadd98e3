//! `kdiag execsnoop`: exec events system-wide, like execsnoop: one line per
//! exec as it happens (TIME PCOMM PID PPID RET ARGS), or JSON at the end.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::instruments::Ask;
use crate::instruments::exec::Filter;
use crate::instruments::target::{self, Interrupt, Scope};
use crate::model::exec::{ExecEvent, TraceEvent};
use crate::render;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Include failed execs, with their errno names
    #[arg(short = 'x', long)]
    pub failed: bool,
    /// Only processes whose command name contains NAME
    #[arg(short = 'n', long)]
    pub name: Option<String>,
    /// Only execs by this user (name or uid)
    #[arg(short = 'u', long = "user", value_name = "USER", value_parser = super::args::user)]
    pub uid: Option<u32>,
    /// Tracing tier: bpf reads filenames and arguments in the kernel; perf
    /// reads arguments from /proc after the fact (best effort)
    #[arg(long, default_value = "auto",
          value_parser = super::args::tier(&crate::instruments::exec::SNOOP_TIERS))]
    pub tier: Ask,
    /// Print the execs as JSON when done
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub duration: super::args::TraceDuration,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    target::require_root("kdiag execsnoop")?;
    // Ctrl-C or SIGTERM is how execsnoop ends: exit 0, as execsnoop's.
    let interrupt = Interrupt::catch_only(&[libc::SIGINT, libc::SIGTERM])?;
    // -u, else the caller's own on a course server: filtered in the kernel.
    let scope = match args.uid {
        Some(uid) => Scope::User(uid),
        None => super::args::scope()?,
    };
    let filter = Filter {
        pid: None,
        follow_children: false,
        signals: false,
        scope,
    };
    let (mut source, fallback) = crate::instruments::exec::open(args.tier, filter, None)?;
    let notes: Vec<String> = fallback.iter().map(|f| f.note()).collect();
    let mut err = std::io::stderr().lock();
    for n in notes.iter().chain(&source.notes()) {
        writeln!(err, "note: {n}")?;
    }
    writeln!(
        err,
        "tracing execs {} ({} tier); Ctrl-C to stop",
        match scope {
            Scope::Everyone => "system-wide".into(),
            user => format!("of {}", user.describe("")),
        },
        source.tier().name()
    )?;
    drop(err);

    let deadline = args
        .duration
        .secs()
        .map(|d| Instant::now() + Duration::from_secs_f64(d));
    let mut out = std::io::stdout().lock();
    if !args.json {
        writeln!(out, "{}", header(args.failed))?;
        out.flush()?;
    }
    let mut kept = Vec::new();
    let mut batch = Vec::new();
    while !interrupt.is_set() && deadline.is_none_or(|d| Instant::now() < d) {
        source.poll(Duration::from_millis(100), &mut batch)?;
        for e in batch.drain(..) {
            let TraceEvent::Exec(e) = e else { continue };
            if !wanted(&args, &e) {
                continue;
            }
            if args.json {
                kept.push(e);
            } else {
                writeln!(out, "{}", line(&e, args.failed))?;
                out.flush()?;
            }
        }
    }
    if args.json {
        render::json(&mut out, &kept)?;
    }
    if source.lost() > 0 {
        eprintln!("warning: the kernel dropped {} events", source.lost());
    }
    Ok(crate::error::OK)
}

fn wanted(args: &Args, e: &ExecEvent) -> bool {
    (args.failed || e.ret == 0)
        && args.name.as_deref().is_none_or(|n| e.comm.contains(n))
        && args.uid.is_none_or(|u| u == e.uid)
}

fn header(failed: bool) -> String {
    let mut h = format!(
        "{:<8} {:<16} {:>7} {:>7} {:>4} ",
        "TIME", "PCOMM", "PID", "PPID", "RET"
    );
    if failed {
        h.push_str(&format!("{:<8} ", "ERRNO"));
    }
    h.push_str("ARGS");
    h
}

/// One execsnoop line; the time is when kdiag received the event.
fn line(e: &ExecEvent, failed: bool) -> String {
    let now = wall_clock();
    let mut l = format!(
        "{now:<8} {:<16} {:>7} {:>7} {:>4} ",
        crate::analysis::ps::printable(&e.comm),
        e.pid,
        e.ppid,
        e.ret
    );
    if failed {
        l.push_str(&format!("{:<8} ", e.errno.unwrap_or("-")));
    }
    l.push_str(&crate::render::exec::args_text(e));
    l
}

fn wall_clock() -> String {
    // SAFETY: time and localtime_r only write into the structs given.
    unsafe {
        let t = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&t, &mut tm);
        format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec)
    }
}
