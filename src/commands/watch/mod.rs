//! `kdiag watch`: diagnose's thread-state model, always on, for the whole
//! machine (or one process, or one cgroup), grouped and exported for
//! Prometheus (`--listen`) or node_exporter's textfile collector
//! (`--textfile`); without either, a table every interval.

mod flight;
mod serve;
mod textfile;

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error;
use crate::instruments::watch::{GroupBy, Options, Scope, Watcher};
use crate::model::watch::{STATES, Snapshot};
use crate::render::prometheus;
use crate::sys::process::interrupt::Interrupt;

/// Thread samples are taken every tick between scans: five per interval,
/// at most one a second.
const TICK: Duration = Duration::from_secs(1);

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Seconds between scans: each exports the last interval's thread states and verdicts (1 to 3600)
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = interval)]
    pub interval: f64,
    /// Watch one process (its threads) instead of the whole machine
    #[arg(long, short = 'p', value_name = "PID", value_parser = super::args::pid::<i32>, conflicts_with = "cgroup")]
    pub pid: Option<i32>,
    /// Watch the processes of a cgroup directory and every cgroup below it
    // A cgroup, not a user's file: kdiag reads the kernel's cgroup.procs
    // (world-readable) under /sys/fs/cgroup, never a path's contents.
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::Other)]
    pub cgroup: Option<PathBuf>,
    /// Watch the processes of a systemd unit (nginx, nginx.service), its
    /// cgroup found by name in the cgroup trees
    #[arg(long, value_name = "NAME", conflicts_with_all = ["pid", "cgroup"])]
    pub unit: Option<String>,
    /// Group processes by name (default) or by cgroup: one set of series per group
    #[arg(long, value_name = "BY", default_value = "name")]
    pub group_by: GroupBy,
    /// Export the N busiest groups (1 to 1000)
    #[arg(long, value_name = "N", default_value = "20", value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub top: u16,
    /// Serve Prometheus' /metrics on this address (e.g. 127.0.0.1:9464)
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Write DIR/kdiag.prom every interval for node_exporter's textfile collector
    #[arg(long, value_name = "DIR")]
    pub textfile: Option<PathBuf>,
    /// Keep a flight record (diagnose's record and HTML report) in DIR when
    /// a group's verdict turns bad and stays so for --record-after
    #[arg(long, value_name = "DIR")]
    pub flight_dir: Option<PathBuf>,
    /// Seconds a bad verdict (io, lock, sched, a cgroup limit, a stall,
    /// memory-trend) lasts before it is recorded
    #[arg(long, value_name = "SECS", default_value = "30", value_parser = super::args::duration, requires = "flight_dir")]
    pub record_after: f64,
    /// Flight records kept at most, the oldest removed first
    #[arg(long, value_name = "N", default_value = "20", value_parser = clap::value_parser!(u16).range(1..), requires = "flight_dir")]
    pub flight_keep: u16,
    /// Bytes of flight records kept at most (e.g. 100M), the oldest removed first
    #[arg(long, value_name = "SIZE", default_value = "100M", value_parser = super::args::size, requires = "flight_dir")]
    pub flight_max_size: u64,
    /// Stop after this many seconds (default: until interrupted)
    #[arg(long, value_name = "SECS", value_parser = super::args::duration)]
    pub duration: Option<f64>,
}

fn interval(s: &str) -> Result<f64, String> {
    let v = super::args::interval(s)?;
    if v < 1.0 {
        return Err(format!("{s}: the interval is at least 1 second"));
    }
    Ok(v)
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let interrupt = Interrupt::catch()?;
    let scope = match (&args.pid, &args.cgroup, &args.unit) {
        (Some(p), _, _) => Scope::Pid(*p),
        (None, Some(c), _) => Scope::Cgroup(super::args::cgroup_dir("--cgroup", c)?),
        (None, None, Some(u)) => Scope::Cgroup(super::args::unit_dir(u)?),
        (None, None, None) => Scope::All,
    };
    let textfile = args
        .textfile
        .as_deref()
        .map(textfile::Textfile::new)
        .transpose()?;
    let mut recorder = args
        .flight_dir
        .as_deref()
        .map(|dir| {
            let limits = flight::Limits {
                after_s: args.record_after,
                keep: args.flight_keep as usize,
                max_bytes: args.flight_max_size,
            };
            flight::Recorder::new(dir, limits, &interrupt)
        })
        .transpose()?;
    let body = Arc::new(Mutex::new(String::new()));
    let server = match args.listen {
        Some(addr) => {
            let s = serve::start(addr, Arc::clone(&body))
                .map_err(|e| error::usage(format!("--listen {addr}: {e} (choose a free port)")))?;
            eprintln!("kdiag watch: serving http://{}/metrics", s.addr);
            Some(s)
        }
        None => None,
    };
    let mut watcher = Watcher::new(Options {
        scope,
        group_by: args.group_by,
        top: args.top as usize,
    });
    let every = Duration::from_secs_f64(args.interval);
    let tick = every.div_f64(5.0).min(TICK);
    let end = args
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d));
    let publish = |snap: &Snapshot| -> anyhow::Result<()> {
        let text = prometheus::render(snap);
        if let Some(t) = &textfile {
            t.write(&text)?;
        }
        if server.is_some() || textfile.is_some() {
            *body.lock().expect("the listener never panics holding it") = text;
        } else {
            print_table(snap);
        }
        Ok(())
    };
    let mut scan = |watcher: &mut Watcher| -> anyhow::Result<Snapshot> {
        let mut snap = watcher.scan()?;
        if let Some(r) = recorder.as_mut() {
            r.after_scan(&mut snap, watcher)?;
        }
        Ok(snap)
    };
    publish(&scan(&mut watcher)?)?;
    let mut next_scan = Instant::now() + every;
    let mut next_tick = Instant::now() + tick;
    while !interrupt.is_set() && end.is_none_or(|e| Instant::now() < e) {
        let now = Instant::now();
        if now >= next_scan {
            publish(&scan(&mut watcher)?)?;
            next_scan += every;
            next_tick = Instant::now() + tick;
        } else if now >= next_tick {
            watcher.sample();
            next_tick += tick;
        } else {
            let until = next_scan.min(next_tick).min(end.unwrap_or(next_scan));
            std::thread::sleep((until - now).min(Duration::from_millis(100)));
        }
    }
    drop(server);
    if let Some(r) = recorder {
        r.finish()?;
    }
    Ok(interrupt.exit_code(error::OK, true))
}

fn print_table(s: &Snapshot) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{:<24} {:<13} {:>6} {:>7}  busiest states (thread seconds)",
        "GROUP", "VERDICT", "PROCS", "THREADS"
    );
    let mut groups: Vec<_> = s.groups.iter().collect();
    groups.sort_by(|a, b| b.working_s.total_cmp(&a.working_s));
    for g in groups {
        let mut states: Vec<(usize, f64)> = g.thread_seconds.iter().copied().enumerate().collect();
        states.sort_by(|a, b| b.1.total_cmp(&a.1));
        let top: Vec<String> = states
            .iter()
            .take(3)
            .filter(|s| s.1 > 0.0)
            .map(|(i, v)| format!("{} {v:.1}", STATES[*i].1))
            .collect();
        let verdict = g.verdict.map_or("-", |v| v.name());
        let _ = writeln!(
            out,
            "{:<24} {verdict:<13} {:>6} {:>7}  {}",
            g.name,
            g.processes,
            g.threads,
            top.join(", ")
        );
    }
    let _ = writeln!(out);
}
