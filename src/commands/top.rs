//! `kdiag top`: a live view of processes. The collector turns two /proc
//! snapshots into rates; the screen is `tui::top`'s pure render and update.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ratatui::crossterm::event::{self, Event};

use crate::analysis::top::{self as analysis, Column};
use crate::error;
use crate::instruments::procs;
use crate::instruments::target::Scope;
use crate::model::process::Process;
use crate::model::system::CpuTimes;
use crate::render::{self, table::Align, table::Table};
use crate::tui::{self, top::Data, top::Key, top::State};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Seconds between refreshes (0.1 to 3600)
    #[arg(
        long = "interval",
        value_name = "SECS",
        default_value = "2",
        value_parser = super::args::interval
    )]
    pub delay: f64,
    /// Print one plain-text frame and exit (also what happens when stdout is not a terminal)
    #[arg(long)]
    pub once: bool,
    #[command(flatten)]
    pub only: super::args::PidList,
    /// Print one frame as JSON and exit (implies --once)
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let mut collector = Collector::new(args.only.pids.clone(), super::args::scope()?)?;
    if args.once || args.json || !io::stdout().is_terminal() {
        // Rates need two snapshots: wait one interval (at most a second).
        std::thread::sleep(Duration::from_secs_f64(args.delay.min(1.0)));
        let data = collector.sample()?;
        let mut out = BufWriter::new(io::stdout().lock());
        let done = if args.json {
            render::json(&mut out, &json_frame(&data))
        } else {
            write_text(&mut out, &data).map_err(Into::into)
        };
        return match done.and_then(|()| out.flush().map_err(Into::into)) {
            Err(e) if is_broken_pipe(&e) => Ok(error::OK),
            other => other.map(|()| error::OK),
        };
    }
    live(collector, Duration::from_secs_f64(args.delay))
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<io::Error>()
        .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
}

fn live(mut collector: Collector, delay: Duration) -> anyhow::Result<u8> {
    // Signals from outside (kill, a closed terminal) end the loop so the
    // guard restores the terminal; Ctrl-C arrives as a key in raw mode.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    // Rates over a few ticks only would be noise (at 100 Hz one tick is a
    // 1% step per 1 s): the first frame waits for a real interval too.
    std::thread::sleep(delay.min(Duration::from_millis(500)));
    let mut state = State {
        data: collector.sample()?,
        ..State::default()
    };
    let mut guard = tui::TerminalGuard::enter().context("cannot set up the terminal")?;
    let mut next = Instant::now() + delay;
    let mut detail_for = None;
    while !state.quit && !stop.load(Ordering::Relaxed) {
        if state.threads != collector.threads {
            // Rows change kind: start the rates afresh, from a new baseline.
            collector.threads = state.threads;
            collector.prev = collector.processes()?;
            state.selected = None;
            next = Instant::now() + delay.min(Duration::from_millis(500));
        }
        if state.detail_pid() != detail_for {
            detail_for = state.detail_pid();
            state.detail = detail_for.map(procs::details);
        }
        guard.terminal.draw(|f| tui::top::render(f, &state))?;
        let wait = next
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(250));
        // Wait on the terminal ourselves: once its other side has gone,
        // crossterm's poll reads the endless end-of-file in a busy loop.
        if tui::wait_for_input(wait) == tui::Input::HungUp {
            break;
        }
        if event::poll(Duration::ZERO)? {
            // Keys change the state; anything else (a resize) just redraws.
            if let Event::Key(k) = event::read()?
                && let Some(key) = Key::from_event(k)
            {
                tui::top::update(&mut state, key);
            }
        }
        if Instant::now() >= next {
            state.data = collector.sample()?;
            detail_for = None; // re-read the panel with fresh numbers
            next += delay;
            if next < Instant::now() {
                next = Instant::now() + delay;
            }
        }
    }
    Ok(error::OK)
}

/// Two snapshots make rates: the previous one is kept between samples.
struct Collector {
    table: procs::Table,
    pids: Vec<i32>,
    /// A learner on a course server sees only their own processes.
    scope: Scope,
    prev: Vec<Process>,
    prev_cpu: CpuTimes,
    prev_at: Instant,
    /// One row per thread (top's `H`).
    threads: bool,
}

impl Collector {
    fn new(pids: Vec<i32>, scope: Scope) -> anyhow::Result<Self> {
        let mut c = Collector {
            table: procs::Table::default(),
            pids,
            scope,
            prev: Vec::new(),
            prev_cpu: CpuTimes::default(),
            prev_at: Instant::now(),
            threads: false,
        };
        c.prev = c.processes()?;
        if !c.pids.is_empty() && c.prev.is_empty() {
            let pids = c.pids.iter().map(|&p| i64::from(p)).collect();
            return Err(error::NoSuchProcess(pids).into());
        }
        c.prev_cpu = procs::system()?.cpu;
        c.prev_at = Instant::now();
        Ok(c)
    }

    fn processes(&mut self) -> anyhow::Result<Vec<Process>> {
        let (mut procs, _) = self
            .table
            .read(&self.pids, self.threads)
            .context("cannot list /proc")?;
        procs.retain(|p| self.scope.admits(p.real_uid));
        Ok(procs)
    }

    fn sample(&mut self) -> anyhow::Result<Data> {
        let procs = self.processes()?;
        let system = procs::system().context("cannot read /proc system files")?;
        let now = Instant::now();
        let secs = now.duration_since(self.prev_at).as_secs_f64();
        let rows = if self.threads {
            analysis::thread_rows
        } else {
            analysis::rows
        };
        let data = Data {
            rows: rows(&self.prev, &procs, secs, system.hz, system.memory.total_kib),
            cpu: analysis::cpu_split(&self.prev_cpu, &system.cpu),
            tasks: analysis::task_counts(&procs),
            system,
        };
        self.prev_cpu = data.system.cpu;
        self.prev = procs;
        self.prev_at = now;
        Ok(data)
    }
}

/// The --once frame: top's header, then every process by %CPU.
fn write_text(out: &mut impl Write, data: &Data) -> io::Result<()> {
    for line in tui::top::header_lines(data) {
        writeln!(out, "{line}")?;
    }
    writeln!(out)?;
    let mut rows = data.rows.clone();
    analysis::sort(&mut rows, Column::Cpu, true);
    let mut t = Table::new(Column::ALL.map(|c| {
        let align = match c {
            Column::User | Column::State | Column::Command => Align::Left,
            _ => Align::Right,
        };
        (c.title(), align)
    }));
    for r in &rows {
        t.push(tui::top::cells(r));
    }
    t.write(out)
}

fn json_frame(data: &Data) -> serde_json::Value {
    let mut rows = data.rows.clone();
    analysis::sort(&mut rows, Column::Cpu, true);
    serde_json::json!({
        "system": data.system,
        "cpu": data.cpu,
        "tasks": data.tasks,
        "processes": rows,
    })
}
