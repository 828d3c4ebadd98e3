//! `kdiag ps`: a snapshot of processes like `ps aux`, read straight from /proc.

use std::io::{self, BufWriter, Write};

use anyhow::Context as _;

use crate::analysis::ps::{self, SortKey};
use crate::analysis::top;
use crate::error;
use crate::instruments::procs;
use crate::render;

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

    // Each process's threads' states, for its S column (-T shows each).
    let mut table = procs::Table::new(!args.threads);
    let (mut procs, missing) = table
        .read(&args.only.pids, args.threads)
        .context("cannot list /proc")?;
    if !args.only.pids.is_empty() && procs.is_empty() {
        let s = if missing.len() > 1 { "s" } else { "" };
        let missing: Vec<String> = missing.iter().map(i32::to_string).collect();
        anyhow::bail!("no process with PID{s} {}", missing.join(", "));
    }
    procs.retain(|p| {
        uid.is_none_or(|u| p.uid == u) && args.comm.as_ref().is_none_or(|c| &p.comm == c)
    });

    let cx = procs::ps_context().context("cannot read /proc system files")?;
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
