//! `--pyroscope URL` and `--otlp-profiles URL`: continuous CPU and off-CPU
//! profiles of what watch watches (instruments::continuous), cut every
//! `--push-interval` on a thread of their own and sent through the export
//! sender (sender.rs: bounded queue, oldest dropped, retries). A window's
//! stacks become one series per process name and cgroup: labelled
//! `service_name` (the process's name; `kernel` for kernel threads),
//! `cgroup`, and where its cgroup's path says so `container_id`, `pod_uid`
//! or `unit`. Pyroscope gets each as gzip'd pprof (render::pprof) named
//! `process_cpu` or `offcpu` (`__name__`, as Grafana Alloy names them); an
//! OpenTelemetry collector gets them as OTLP profiles.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::sender::{self, Endpoint, Limits, Request, Sender};
use crate::instruments::continuous::{self, Profiler, Window};
use crate::instruments::watch::Scope;
use crate::model::profile::Profile;
use crate::model::stacks::StackSet;
use crate::render::metrics::{CONTAINER_ID, Label, POD_UID};
use crate::render::{otlp_profiles, pprof, pyroscope};

/// Pyroscope's default port.
pub const PYROSCOPE_PORT: u16 = 4040;

/// `--pyroscope`'s value parser.
pub fn pyroscope_endpoint(url: &str) -> Result<Endpoint, String> {
    sender::endpoint(
        url,
        PYROSCOPE_PORT,
        "http://127.0.0.1:4040 (Pyroscope's address)",
    )
}

/// A few windows wait at most while a receiver is slow or down.
const LIMITS: Limits = Limits {
    requests: 8,
    bytes: 16 << 20,
};

const fn label(prom: &'static str, otel: &'static str) -> Label {
    Label {
        prom,
        otel,
        in_name: &[],
    }
}
const SERVICE: Label = label("service_name", "service.name");
const CGROUP: Label = label("cgroup", "kdiag.cgroup");
const UNIT: Label = label("unit", "kdiag.unit");

/// Where the profiles go, and what is profiled.
pub struct Settings {
    pub pyroscope: Option<Endpoint>,
    pub otlp: Option<Endpoint>,
    pub every: Duration,
    pub hz: u64,
    pub scope: Scope,
}

/// The profiling thread; dropping it stops profiling.
pub struct Pusher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Pusher {
    /// Open the profiler (its errors are returned here) and start pushing.
    pub fn start(s: Settings) -> anyhow::Result<Pusher> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("watch-profiles".into())
            .spawn(move || {
                let pid = match s.scope {
                    Scope::Pid(p) => Some(p),
                    _ => None,
                };
                let started = (|| {
                    let (profiler, note) = continuous::open(continuous::Options { hz: s.hz, pid })?;
                    let start = |what, to: &Option<Endpoint>| {
                        to.clone()
                            .map(|to| Sender::start(what, to, LIMITS))
                            .transpose()
                    };
                    let pyro = start("Pyroscope push", &s.pyroscope)?;
                    let otlp = start("OTLP profiles export", &s.otlp)?;
                    anyhow::Ok((profiler, note, pyro, otlp))
                })();
                let (profiler, pyro, otlp) = match started {
                    Ok((profiler, note, pyro, otlp)) => {
                        let _ = tx.send(Ok(note));
                        (profiler, pyro, otlp)
                    }
                    Err(e) => return drop(tx.send(Err(e))),
                };
                run(profiler, &s, pyro.as_ref(), otlp.as_ref(), &flag);
            })?;
        match rx.recv() {
            Ok(Ok(note)) => {
                if let Some(n) = note {
                    eprintln!("kdiag watch: {n}");
                }
                Ok(Pusher {
                    stop,
                    thread: Some(thread),
                })
            }
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e.context("cannot profile for --pyroscope or --otlp-profiles"))
            }
            Err(_) => anyhow::bail!("the profiling thread ended"),
        }
    }
}

impl Drop for Pusher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(
    mut profiler: Profiler,
    s: &Settings,
    pyro: Option<&Sender>,
    otlp: Option<&Sender>,
    stop: &AtomicBool,
) {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let mut next = Instant::now() + s.every;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let step = if now < next {
            profiler.poll((next - now).min(Duration::from_millis(100)))
        } else {
            next += s.every;
            profiler.window().map(|w| {
                let series = series(&w, continuous::scope_pids(&s.scope).as_ref());
                if let Some(to) = pyro {
                    to.send(pyroscope_request(&series));
                }
                if let Some(to) = otlp {
                    to.send(otlp_request(&series, host.trim()));
                }
            })
        };
        if let Err(e) = step {
            eprintln!("kdiag watch: profiling stopped: {e:#}");
            return;
        }
    }
}

/// Whose stacks a series holds.
struct Whose {
    labels: Vec<(Label, String)>,
}

/// One series: whose, and its CPU and off-CPU profiles of the window.
struct Series {
    whose: Whose,
    cpu: Option<Profile>,
    offcpu: Option<Profile>,
}

/// The window's stacks by series (process name and cgroup), those of
/// processes outside `keep` left out.
fn series(w: &Window, keep: Option<&HashSet<u32>>) -> Vec<Series> {
    let mut by_pid: HashMap<u32, String> = HashMap::new();
    let mut out: BTreeMap<String, Series> = BTreeMap::new();
    for (p, cpu) in [(Some(&w.cpu), true), (w.offcpu.as_ref(), false)] {
        let Some(p) = p else { continue };
        for (i, stack) in p.stacks.iter().enumerate() {
            let pid = p.threads.get(i).map_or(0, |t| t.pid);
            if keep.is_some_and(|k| !k.contains(&pid)) {
                continue;
            }
            let key = by_pid.entry(pid).or_insert_with(|| {
                let whose = whose(pid, &stack.comm);
                let key = whose
                    .labels
                    .iter()
                    .map(|(_, v)| v.as_str())
                    .collect::<Vec<_>>()
                    .join("\0");
                out.entry(key.clone()).or_insert(Series {
                    whose,
                    cpu: None,
                    offcpu: None,
                });
                key
            });
            let series = out.get_mut(key.as_str()).expect("inserted above");
            let part = if cpu {
                &mut series.cpu
            } else {
                &mut series.offcpu
            };
            part.get_or_insert_with(|| Profile {
                target: key.split('\0').next().unwrap_or("").to_string(),
                started_unix_ns: p.started_unix_ns,
                event: p.event.clone(),
                freq_hz: p.freq_hz,
                unit: p.unit,
                modules: p.modules.clone(),
                cost: p.cost.clone(),
                ..Default::default()
            })
            .stacks
            .push(stack.clone());
        }
    }
    out.into_values().collect()
}

/// A process's labels: its name first (`service_name`), its cgroup, who
/// runs in it.
fn whose(pid: u32, comm: &str) -> Whose {
    let p = continuous::process(pid);
    let name = match (&p.comm, p.kernel) {
        (_, true) => "kernel".to_string(),
        (Some(c), false) => c.clone(),
        (None, false) => comm.to_string(),
    };
    let mut labels = vec![(SERVICE, name)];
    let cgroup = p.cgroup.filter(|_| !p.kernel);
    if let Some(r) = cgroup
        .as_deref()
        .and_then(crate::analysis::runs_as::runs_as)
    {
        if r.what.ends_with("container") {
            labels.push((CONTAINER_ID, r.name));
        } else if r.what == "systemd service" {
            labels.push((UNIT, r.name));
        }
        if let Some(pod) = r.pod {
            labels.push((POD_UID, pod));
        }
    }
    if let Some(c) = cgroup {
        labels.push((CGROUP, c));
    }
    Whose { labels }
}

fn pyroscope_request(series: &[Series]) -> Request {
    let mut out = Vec::new();
    for s in series {
        for (p, name) in [(&s.cpu, "process_cpu"), (&s.offcpu, "offcpu")] {
            let Some(p) = p else { continue };
            let Ok(pprof_gz) = pprof::gzipped(&StackSet::of(p)) else {
                continue;
            };
            let mut labels: Vec<(&'static str, String)> = s
                .whose
                .labels
                .iter()
                .map(|(l, v)| (l.prom, v.clone()))
                .collect();
            labels.push(("__name__", name.to_string()));
            out.push(pyroscope::Series { labels, pprof_gz });
        }
    }
    Request {
        path: pyroscope::PATH,
        content_type: pyroscope::CONTENT_TYPE,
        headers: pyroscope::HEADERS,
        body: pyroscope::push_request(&out),
    }
}

fn otlp_request(series: &[Series], host: &str) -> Request {
    let out: Vec<otlp_profiles::Series<'_>> = series
        .iter()
        .map(|s| {
            let mut attrs: Vec<(&'static str, String)> = s
                .whose
                .labels
                .iter()
                .map(|(l, v)| (l.otel, v.clone()))
                .collect();
            attrs.push(("host.name", host.to_string()));
            otlp_profiles::Series {
                attrs,
                profiles: [&s.cpu, &s.offcpu].into_iter().flatten().collect(),
            }
        })
        .collect();
    Request {
        path: otlp_profiles::PATH,
        content_type: crate::render::otlp::CONTENT_TYPE,
        headers: otlp_profiles::HEADERS,
        body: otlp_profiles::request(&out),
    }
}
