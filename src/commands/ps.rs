//! `kdiag ps`: a snapshot of processes like `ps aux`, read straight from /proc.

use std::io::{self, BufWriter, Write};

use anyhow::Context as _;

use crate::analysis::ps::{self, Context, SortKey};
use crate::analysis::top;
use crate::error;
use crate::render;
use crate::sys::procfs;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub only: super::args::PidList,
    /// Only processes whose effective user is USER (name or uid)
    #[arg(short = 'u', long = "user", value_name = "USER", value_parser = super::args::user)]
    pub user: Option<u32>,
    /// Only processes whose name (comm) is NAME
    #[arg(long, value_name = "NAME")]
    pub comm: Option<String>,
    /// One line per thread, with an LWP column
    #[arg(short = 'T', long = "threads")]
    pub threads: bool,
    /// Sort by a column (pid, user, %cpu, %mem, vsz, rss, tty, stat, start, time,
    /// command, comm); a leading - sorts descending
    #[arg(long, value_name = "FIELD", allow_hyphen_values = true, value_parser = sort_key)]
    pub sort: Option<SortKey>,
    /// Show process trees, children under their parent
    #[arg(long)]
    pub forest: bool,
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

fn sort_key(s: &str) -> Result<SortKey, String> {
    s.parse()
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let sort = args.sort;
    let uid = args.user;

    let mut reader = procfs::Reader::new();
    // Each process's threads' states, for its S column (-T shows each).
    reader.top_extras = !args.threads;
    let mut procs = Vec::new();
    if args.only.pids.is_empty() {
        procs = reader.all(args.threads).context("cannot list /proc")?;
    } else {
        let mut missing = Vec::new();
        // Like ps: in PID order, each once.
        let mut pids = args.only.pids.clone();
        pids.sort_unstable();
        pids.dedup();
        for pid in pids {
            let found = if args.threads {
                reader.threads(pid)
            } else {
                reader.process(pid).into_iter().collect()
            };
            if found.is_empty() {
                missing.push(pid.to_string());
            }
            procs.extend(found);
        }
        if procs.is_empty() {
            let s = if missing.len() > 1 { "s" } else { "" };
            anyhow::bail!("no process with PID{s} {}", missing.join(", "));
        }
    }
    procs.retain(|p| {
        uid.is_none_or(|u| p.uid == u) && args.comm.as_ref().is_none_or(|c| &p.comm == c)
    });

    let system = procfs::system().context("cannot read /proc system files")?;
    let (now, utc_offset) = procfs::clock();
    let cx = Context {
        uptime_secs: system.uptime_secs,
        hz: system.hz,
        mem_total_kib: system.memory.total_kib,
        boot_time: system.boot_time,
        now,
        utc_offset,
    };
    let mut rows: Vec<ps::Row> = procs
        .iter()
        .map(|p| ps::row(p, &cx, top::process_state(p)))
        .collect();
    if let Some(key) = sort {
        ps::sort(&mut rows, key);
    }
    if args.forest {
        rows = ps::forest(rows);
    }

    let mut out = BufWriter::new(io::stdout().lock());
    let written = if args.json {
        render::json(&mut out, &rows)
    } else {
        render::ps::write(&mut out, &rows, args.threads).map_err(Into::into)
    }
    .and_then(|()| out.flush().map_err(Into::into));
    match written {
        Err(e)
            if e.downcast_ref::<io::Error>()
                .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe) => {}
        other => other?,
    }
    // Like ps: nothing matched the filters is a failure.
    Ok(if rows.is_empty() {
        error::FAILURE
    } else {
        error::OK
    })
}
