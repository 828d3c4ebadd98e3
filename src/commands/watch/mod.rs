//! `kdiag watch`: diagnose's thread-state model, always on, for the whole
//! machine (or one process, one cgroup, one container), grouped and exported for
//! Prometheus (`--listen`), node_exporter's textfile collector
//! (`--textfile`) or an OpenTelemetry collector (`--otlp`); without any, a
//! table every interval.

mod config;

use std::collections::HashMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use crate::analysis::watch::verdict_changes;
use crate::error;
use crate::export::sender::Endpoint;
use crate::export::{flight, otlp, profiles, serve, textfile};
use crate::instruments::Ask;
use crate::instruments::target::Interrupt;
use crate::instruments::watch::{self, GroupBy, Options, Scope, Watcher, container};
use crate::model::watch::{STATES, Snapshot};
use crate::render::prometheus;

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
    /// Watch a container or pod by the name its cgroup path gives it
    /// (Docker, Podman, containerd, CRI-O: its id's first 12 characters or
    /// more; LXC: its name; Kubernetes: a pod's uid), found again every scan
    #[arg(long, value_name = "NAME", conflicts_with_all = ["pid", "cgroup", "unit"])]
    pub container: Option<String>,
    /// Group processes by the container or systemd service they run in, else by name
    /// (auto, the default), by name only, or by cgroup: one set of series per group
    #[arg(long, value_name = "BY", default_value = "auto")]
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
    /// Send the metrics, and each verdict change as a log record, to an
    /// OpenTelemetry collector over OTLP/HTTP (e.g. http://127.0.0.1:4318)
    #[arg(long, value_name = "URL", value_parser = otlp::endpoint)]
    pub otlp: Option<Endpoint>,
    /// Send CPU and off-CPU profiles of what is watched to Pyroscope's push
    /// API every --push-interval (e.g. http://127.0.0.1:4040)
    #[arg(long, value_name = "URL", value_parser = profiles::pyroscope_endpoint)]
    pub pyroscope: Option<Endpoint>,
    /// Send the same profiles as OTLP profiles (v1development, public
    /// alpha) to an OpenTelemetry collector (e.g. http://127.0.0.1:4318)
    #[arg(long, value_name = "URL", value_parser = otlp::endpoint)]
    pub otlp_profiles: Option<Endpoint>,
    /// Seconds each profile sent covers (1 to 3600)
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = interval)]
    pub push_interval: f64,
    /// CPU samples a second (per CPU) of the profiles sent (1 to 1000)
    #[arg(long, value_name = "HZ", default_value = "19", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub push_hz: u64,
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
    /// Read the options from a TOML file instead (one key per long option:
    /// `interval = 5`, `group-by = "cgroup"`); SIGHUP reads it again
    #[arg(long, value_name = "FILE", conflicts_with_all = ["pid", "cgroup", "unit", "container", "group_by", "top", "listen", "textfile", "otlp", "pyroscope", "otlp_profiles", "push_interval", "push_hz", "flight_dir", "interval"])]
    pub config: Option<PathBuf>,
    /// Stop after this many seconds (default: until interrupted)
    #[arg(long, value_name = "SECS", value_parser = super::args::duration)]
    pub duration: Option<f64>,
    /// Where the processes' counters come from
    #[arg(long, default_value = "auto",
          value_parser = super::args::tier(&crate::instruments::watch::TIERS))]
    pub tier: Ask,
}

fn interval(s: &str) -> Result<f64, String> {
    let v = super::args::interval(s)?;
    if v < 1.0 {
        return Err(format!("{s}: the interval is at least 1 second"));
    }
    Ok(v)
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let end = args
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d));
    let mut listener = None;
    let Some(file) = args.config.clone() else {
        let interrupt = Interrupt::catch()?;
        Session::new(&args, &interrupt, &mut listener, false)?.run(&interrupt, None, end)?;
        return Ok(interrupt.exit_code(error::OK, true));
    };
    // With a file, SIGHUP reads it again instead of ending watch.
    let interrupt = Interrupt::catch_only(&[SIGINT, SIGTERM])?;
    let hangup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(SIGHUP, Arc::clone(&hangup))?;
    let mut settings = config::load(&file)?;
    let mut session = Session::new(&settings, &interrupt, &mut listener, false)?;
    loop {
        session.run(&interrupt, Some(&hangup), end)?;
        if !hangup.swap(false, Ordering::Relaxed) {
            break;
        }
        // A file that does not load, or options that cannot be applied
        // (a cgroup gone, a port taken), leave watch as it was.
        let reloaded = config::load(&file).and_then(|new| {
            let s = Session::new(&new, &interrupt, &mut listener, false)?;
            Ok((new, s))
        });
        session = match reloaded {
            Ok((new, s)) => {
                eprintln!("kdiag watch: reloaded {}", file.display());
                settings = new;
                s
            }
            Err(e) => {
                eprintln!("kdiag watch: {e:#}; going on as before");
                // The settings it ran with: their container may be
                // between two cgroups (restarting) and is still the scope.
                Session::new(&settings, &interrupt, &mut listener, true)?
            }
        };
    }
    Ok(interrupt.exit_code(error::OK, true))
}

/// The listener, kept across reloads while its address stays: the
/// address asked for, the server and the exposition it serves.
type Listener = Option<(SocketAddr, serve::Server, Arc<Mutex<String>>)>;

/// One configuration's watch: what it watches and where it exports.
struct Session {
    watcher: Watcher,
    every: Duration,
    textfile: Option<textfile::Textfile>,
    recorder: Option<flight::FlightRecorder>,
    otlp: Option<otlp::Exporter>,
    /// The profiles pushed, on a thread of their own.
    _pusher: Option<profiles::Pusher>,
    /// Each group's verdict at the last scan (for the verdict changes).
    verdicts: HashMap<String, crate::model::diagnosis::Class>,
    /// What the listener serves, if there is one.
    body: Option<Arc<Mutex<String>>>,
}

impl Session {
    /// `again`: the settings watch already ran with.
    fn new(
        args: &Args,
        interrupt: &Interrupt,
        listener: &mut Listener,
        again: bool,
    ) -> anyhow::Result<Session> {
        let scope = match (&args.pid, &args.cgroup, &args.unit, &args.container) {
            (Some(p), ..) => Scope::Pid(*p),
            (None, Some(c), ..) => Scope::Cgroup(super::args::cgroup_dir("--cgroup", c)?),
            (None, None, Some(u), _) => Scope::Cgroup(super::args::unit_dir(u)?),
            (None, None, None, Some(c)) if again => Scope::Container(c.clone()),
            (None, None, None, Some(c)) => container_scope(c)?,
            (None, None, None, None) => Scope::All,
        };
        let textfile = args
            .textfile
            .as_deref()
            .map(textfile::Textfile::new)
            .transpose()?;
        let recorder = args
            .flight_dir
            .as_deref()
            .map(|dir| {
                let limits = flight::Limits {
                    after_s: args.record_after,
                    keep: args.flight_keep as usize,
                    max_bytes: args.flight_max_size,
                };
                flight::FlightRecorder::new(dir, limits, interrupt)
            })
            .transpose()?;
        let otlp = args.otlp.clone().map(otlp::Exporter::start).transpose()?;
        let pusher = match (&args.pyroscope, &args.otlp_profiles) {
            (None, None) => None,
            (pyroscope, otlp) => Some(profiles::Pusher::start(profiles::Settings {
                pyroscope: pyroscope.clone(),
                otlp: otlp.clone(),
                every: Duration::from_secs_f64(args.push_interval),
                hz: args.push_hz,
                scope: scope.clone(),
            })?),
        };
        if listener.as_ref().map(|l| l.0) != args.listen {
            *listener = None;
            if let Some(addr) = args.listen {
                let body = Arc::new(Mutex::new(String::new()));
                let s = serve::start(addr, Arc::clone(&body)).map_err(|e| {
                    error::usage(format!("--listen {addr}: {e} (choose a free port)"))
                })?;
                eprintln!("kdiag watch: serving http://{}/metrics", s.addr);
                *listener = Some((addr, s, body));
            }
        }
        let (source, fallback) = watch::open(args.tier)?;
        if let Some(f) = fallback {
            eprintln!("kdiag watch: {}", f.note());
        }
        Ok(Session {
            watcher: Watcher::new(
                Options {
                    scope,
                    group_by: args.group_by,
                    top: args.top as usize,
                },
                source,
            ),
            every: Duration::from_secs_f64(args.interval),
            textfile,
            recorder,
            otlp,
            _pusher: pusher,
            verdicts: HashMap::new(),
            body: listener.as_ref().map(|l| Arc::clone(&l.2)),
        })
    }

    /// Scan and sample until a signal, the end, or a hangup (then the
    /// flight capture under way is waited for).
    fn run(
        &mut self,
        interrupt: &Interrupt,
        hangup: Option<&AtomicBool>,
        end: Option<Instant>,
    ) -> anyhow::Result<()> {
        let tick = self.every.div_f64(5.0).min(TICK);
        self.scan()?;
        let mut next_scan = Instant::now() + self.every;
        let mut next_tick = Instant::now() + tick;
        let hung_up = || hangup.is_some_and(|h| h.load(Ordering::Relaxed));
        while !interrupt.is_set() && !hung_up() && end.is_none_or(|e| Instant::now() < e) {
            let now = Instant::now();
            if now >= next_scan {
                self.scan()?;
                next_scan += self.every;
                next_tick = Instant::now() + tick;
            } else if now >= next_tick {
                self.watcher.sample();
                next_tick += tick;
            } else {
                let until = next_scan.min(next_tick).min(end.unwrap_or(next_scan));
                std::thread::sleep((until - now).min(Duration::from_millis(100)));
            }
        }
        match self.recorder.take() {
            Some(r) => r.finish(),
            None => Ok(()),
        }
    }

    /// One scan, exported.
    fn scan(&mut self) -> anyhow::Result<()> {
        let mut snap = self.watcher.scan()?;
        if let Some(r) = self.recorder.as_mut() {
            r.after_scan(&mut snap, &self.watcher)?;
        }
        let verdicts: Vec<_> = snap
            .groups
            .iter()
            .filter_map(|g| Some((g.name.as_str(), g.verdict?)))
            .collect();
        let mut events = verdict_changes(&mut self.verdicts, &verdicts);
        if let Some(r) = self.recorder.as_mut() {
            events.extend(r.take_events());
        }
        if let Some(o) = &self.otlp {
            o.send(&snap, &events);
        }
        let text = prometheus::render(&snap);
        if let Some(t) = &self.textfile {
            t.write(&text)?;
        }
        match &self.body {
            Some(body) => *body.lock().expect("the listener never panics holding it") = text,
            None if self.textfile.is_none() && self.otlp.is_none() && self._pusher.is_none() => {
                print_table(&snap)
            }
            None => {}
        }
        Ok(())
    }
}

/// `--container NAME`, when the cgroup trees have it now; else a usage
/// error that lists the containers they have.
fn container_scope(name: &str) -> anyhow::Result<Scope> {
    if !container::dirs(name).is_empty() {
        return Ok(Scope::Container(name.to_string()));
    }
    const SHOWN: usize = 20;
    let known = container::known();
    let list = match known.len() {
        0 => "none (no cgroup path here names a container)".to_string(),
        n if n > SHOWN => format!("{}, and {} more", known[..SHOWN].join(", "), n - SHOWN),
        _ => known.join(", "),
    };
    Err(error::usage(format!(
        "--container {name}: no container or pod of that name in the cgroup trees (give a container's id, 12 characters or more, an LXC container's name or a pod's uid); the containers here: {list}"
    )))
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
