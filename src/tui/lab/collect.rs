//! The lab app's collectors: threads that read /proc or trace, and send
//! their batches to the loop as `Msg::Data`. /proc is read all along (the
//! process table and the trend need every second); a tracing session runs
//! only for the panel on screen and ends, detaching everything, when its
//! stop flag is set.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use super::event::{Data, Msg};
use super::panels::process::FocusSample;
use super::panels::processes::ProcSample;
use crate::analysis::top as analysis;
use crate::instruments::block::{self, Options};
use crate::instruments::exec::{self, Filter};
use crate::instruments::offcpu;
use crate::instruments::{Ask, Tier};
use crate::instruments::{procs, profile, target};
use crate::model::lab::Panel;
use crate::model::process::Process;
use crate::model::profile::Profile;
use crate::tui::top::Data as TopData;

fn send(tx: &Sender<Msg>, d: Data) -> bool {
    tx.send(Msg::Data(d)).is_ok()
}

/// Every process once a second, and the chosen process (`focus`, 0 for
/// none) in detail: its threads' states every 20 ms, its counters each
/// second.
pub fn procs(
    tx: Sender<Msg>,
    focus: Arc<AtomicI32>,
    stop: Arc<AtomicBool>,
    t0: Instant,
    mine: Option<u32>,
) {
    let mut table = procs::Table::default();
    let mut processes = move || {
        table.processes().map(|mut all| {
            all.retain(|p| mine.is_none_or(|uid| p.uid == uid));
            all
        })
    };
    let mut prev: Vec<Process> = processes().unwrap_or_default();
    let mut prev_cpu = procs::system().map(|s| s.cpu).unwrap_or_default();
    let mut prev_at = Instant::now();
    let mut watch = Watch::default();
    let mut next = Instant::now() + Duration::from_secs(1);
    while !stop.load(Ordering::Relaxed) {
        let pid = focus.load(Ordering::Relaxed);
        if pid != watch.pid {
            watch = Watch {
                pid,
                ..Default::default()
            };
        }
        if pid > 0 {
            watch.sample_states();
        }
        if Instant::now() >= next {
            next += Duration::from_secs(1);
            let Ok(procs) = processes() else {
                continue;
            };
            let Ok(system) = procs::system() else {
                continue;
            };
            let now = Instant::now();
            let secs = now.duration_since(prev_at).as_secs_f64();
            let data = TopData {
                rows: analysis::rows(&prev, &procs, secs, system.hz, system.memory.total_kib),
                cpu: analysis::cpu_split(&prev_cpu, &system.cpu),
                tasks: analysis::task_counts(&procs),
                system,
            };
            let since = t0.elapsed().as_secs_f64();
            if pid > 0 {
                let s = watch.second(&procs, since, data.system.hz);
                if !send(&tx, Data::Focus(s)) {
                    return;
                }
            }
            prev_cpu = data.system.cpu;
            prev = procs;
            prev_at = now;
            let sample = ProcSample { secs: since, data };
            if !send(&tx, Data::Procs(Box::new(sample))) {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The chosen process between two seconds.
#[derive(Default)]
struct Watch {
    pid: i32,
    /// Counters at the start of the second: (utime, stime, minflt, majflt,
    /// read, write, vcsw, ivcsw).
    last: Option<(Instant, [u64; 8], bool)>,
    states: HashMap<char, u32>,
    wchans: HashMap<String, u32>,
    samples: u32,
}

impl Watch {
    fn sample_states(&mut self) {
        for (state, wchan) in procs::thread_states(self.pid) {
            *self.states.entry(state).or_default() += 1;
            self.samples += 1;
            if let Some(w) = wchan {
                *self.wchans.entry(w).or_default() += 1;
            }
        }
    }

    /// The second just ended, from the process in `procs`.
    fn second(&mut self, procs: &[Process], secs: f64, hz: u64) -> FocusSample {
        let p = procs.iter().find(|p| p.pid == self.pid);
        let faults = procs::faults(self.pid);
        let now = Instant::now();
        let mut s = FocusSample {
            secs,
            pid: self.pid,
            gone: p.is_none(),
            ..Default::default()
        };
        if let Some(p) = p {
            let io = p.io.map(|io| (io.read_bytes, io.write_bytes));
            let counters = [
                p.utime,
                p.stime,
                faults.0,
                faults.1,
                io.map_or(0, |i| i.0),
                io.map_or(0, |i| i.1),
                p.voluntary_ctxt,
                p.nonvoluntary_ctxt,
            ];
            s.comm.clone_from(&p.comm);
            s.threads = p.num_threads as usize;
            s.rss_kib = p.rss_kib;
            if let Some((at, before, had_io)) = self.last {
                let dt = now.duration_since(at).as_secs_f64().max(0.001);
                let rate = |i: usize| counters[i].saturating_sub(before[i]) as f64 / dt;
                let cpu = |i: usize| rate(i) * 100.0 / hz.max(1) as f64;
                s.user_pct = cpu(0);
                s.sys_pct = cpu(1);
                s.minflt_s = rate(2);
                s.majflt_s = rate(3);
                if io.is_some() && had_io {
                    s.read_bps = Some(rate(4));
                    s.write_bps = Some(rate(5));
                }
                s.vcsw_s = rate(6);
                s.ivcsw_s = rate(7);
            }
            self.last = Some((now, counters, io.is_some()));
        }
        let n = self.samples.max(1) as f64;
        let mut states: Vec<(char, f64)> = self
            .states
            .drain()
            .map(|(c, k)| (c, k as f64 / n))
            .collect();
        states.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut wchans: Vec<(String, f64)> = self
            .wchans
            .drain()
            .map(|(w, k)| (w, k as f64 / n))
            .collect();
        wchans.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        s.states = states;
        s.wchans = wchans;
        self.samples = 0;
        s
    }
}

/// Block requests of every process (every process of the observed user),
/// in batches of about 250 ms.
pub fn iosnoop(tx: Sender<Msg>, stop: Arc<AtomicBool>, mine: Option<u32>) {
    // Whose each PID is, asked once per PID a second.
    let mut owners: HashMap<u32, bool> = HashMap::new();
    let (mut source, note) = match block::open(Ask::Auto, Options::default()) {
        Ok(s) => s,
        Err(e) => {
            for p in [Panel::Iosnoop, Panel::IoPattern] {
                send(&tx, Data::Failed(p, format!("{e:#}")));
            }
            return;
        }
    };
    let tier = match source.tier() {
        Tier::Bpf => "BPF tier",
        _ => "perf tier",
    };
    let note = note.map_or(String::new(), |n| format!(" ({})", n.note()));
    let mut batch = Vec::new();
    let mut sent = Instant::now();
    let mut status_at = Instant::now() - Duration::from_secs(1);
    while !stop.load(Ordering::Relaxed) {
        if let Err(e) = source.poll(Duration::from_millis(100), &mut batch) {
            send(&tx, Data::Failed(Panel::Iosnoop, format!("{e:#}")));
            return;
        }
        if let Some(uid) = mine {
            batch.retain(|io| {
                *owners
                    .entry(io.pid)
                    .or_insert_with(|| target::owner(io.pid) == Some(uid))
            });
        }
        if sent.elapsed() >= Duration::from_millis(250) {
            sent = Instant::now();
            if !batch.is_empty() && !send(&tx, Data::Io(std::mem::take(&mut batch))) {
                return;
            }
        }
        if status_at.elapsed() >= Duration::from_secs(1) {
            status_at = Instant::now();
            owners.clear(); // PIDs are reused
            let s = format!("{tier}, {} events lost{note}", source.lost());
            for p in [Panel::Iosnoop, Panel::IoPattern] {
                send(&tx, Data::Status(p, s.clone()));
            }
        }
    }
    // Dropping the source detaches the programs and closes the events.
}

/// How long one profile window lasts.
const WINDOW: Duration = Duration::from_secs(2);
/// Sampling frequency of the profile panel. A leak's page faults take about
/// a microsecond each: at 2 MiB/s (lab 7's slowest seed) 999 Hz catches
/// about 6 in the panel's 10 s, 199 Hz one, too few to save as evidence.
pub const PROFILE_HZ: u64 = 999;

/// The CPU profile of `pid`, one window every two seconds.
pub fn profile(tx: Sender<Msg>, pid: i32, stop: Arc<AtomicBool>) {
    let mut sampler = match profile::open(profile::Request::clock(PROFILE_HZ), Some(pid)) {
        Ok(s) => s,
        Err(e) => {
            send(&tx, Data::Failed(Panel::Profile, format!("{e:#}")));
            return;
        }
    };
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    while !stop.load(Ordering::Relaxed) {
        let start = Instant::now();
        while start.elapsed() < WINDOW && !stop.load(Ordering::Relaxed) {
            if let Err(e) = sampler.poll(Duration::from_millis(100)) {
                send(&tx, Data::Failed(Panel::Profile, format!("{e:#}")));
                return;
            }
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let mut p = Profile {
            target: format!("PID {pid} ({})", comm.trim()),
            ..Default::default()
        };
        p.cost.wall_secs = start.elapsed().as_secs_f64();
        sampler.window(&mut p);
        let status = format!(
            "perf_event_open cpu-clock at {PROFILE_HZ} Hz, {} records lost",
            p.lost
        );
        if !send(&tx, Data::Profile(Box::new(p)))
            || !send(&tx, Data::Status(Panel::Profile, status))
        {
            return;
        }
    }
}

/// How long one off-CPU window lasts: a lock or a sleep of a second shows.
const OFFCPU_WINDOW: Duration = Duration::from_secs(3);

/// Where `pid` and its children wait off the CPU, as `kdiag offcpu -p PID`
/// records it, one window every three seconds (the programs are attached
/// for each window and detached at its end).
pub fn offcpu(tx: Sender<Msg>, pid: i32, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let (p, attach) = match offcpu::record(pid, OFFCPU_WINDOW, &stop) {
            Ok(r) => r,
            Err(e) => {
                send(&tx, Data::Failed(Panel::Offcpu, format!("{e:#}")));
                return;
            }
        };
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let status = format!(
            "BPF on sched_switch ({}), {} stacks lost",
            attach.name(),
            p.lost
        );
        if !send(&tx, Data::Offcpu(Box::new(p))) || !send(&tx, Data::Status(Panel::Offcpu, status))
        {
            return;
        }
    }
}

/// Execs of `pid` and its children, explained as exec-trace explains them.
pub fn exec_trace(tx: Sender<Msg>, pid: i32, stop: Arc<AtomicBool>) {
    let filter = Filter {
        pid: Some(pid as u32),
        follow_children: true,
        signals: true,
        // The lab's own workload, the learner's.
        scope: crate::instruments::target::Scope::Everyone,
    };
    let (mut source, fallback) = match exec::open(Ask::Auto, filter, None) {
        Ok(s) => s,
        Err(e) => {
            send(&tx, Data::Failed(Panel::ExecTrace, format!("{e:#}")));
            return;
        }
    };
    let tier = format!(
        "{} tier{}",
        source.tier().name(),
        fallback.map_or(String::new(), |n| format!(" ({})", n.note()))
    );
    send(&tx, Data::Status(Panel::ExecTrace, tier));
    let mut all = Vec::new();
    let mut batch = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        if let Err(e) = source.poll(Duration::from_millis(200), &mut batch) {
            send(&tx, Data::Failed(Panel::ExecTrace, format!("{e:#}")));
            return;
        }
        if batch.is_empty() {
            continue;
        }
        all.extend(batch.iter().cloned());
        let keep = all.len().saturating_sub(2000);
        all.drain(..keep);
        let files = exec::file_facts(&all);
        let findings = crate::analysis::exec_failure::explain(&all, &files);
        if !send(&tx, Data::Exec(std::mem::take(&mut batch), findings)) {
            return;
        }
    }
}
