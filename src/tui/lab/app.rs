//! The lab app's loop, bottom-style: an input thread, a signal thread and
//! the collectors (`collect.rs`) send one message type over one channel;
//! the loop applies each to the state, carries out the effects through the
//! front end's `Driver`, and redraws once the channel is drained. The
//! tracing session of the panel on screen is started and stopped as the
//! learner moves; everything ends before `run` returns.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use ratatui::crossterm::event::{self, Event};

use super::collect;
use super::event::{Effect, Given, Key, Msg, Verdict};
use super::panels::Instrument;
use super::state::State;
use super::view;
use crate::tui::TerminalGuard;

/// What the app needs from the lab engine: the front end implements it.
pub trait Driver {
    /// Save `answers` (key, value) and check step `step`: a verdict for
    /// each of its questions, by answer key.
    fn answer(
        &mut self,
        step: usize,
        answers: &[(String, String)],
    ) -> anyhow::Result<Vec<(String, Verdict)>>;
    /// Save `contents` as file `file` of the learner's lab folder; its path.
    fn save(&mut self, file: &str, contents: &str) -> anyhow::Result<String>;
    /// Every answer in the answers file, checked.
    fn reload(&mut self) -> anyhow::Result<Vec<Given>>;
    /// The same, when the file changed since the last look (`kdiag answer`
    /// or an editor wrote it).
    fn changed(&mut self) -> anyhow::Result<Option<Vec<Given>>>;
    /// Why the workload stopped on its own, if it did.
    fn workload_stopped(&mut self) -> Option<String>;
}

/// Carry out `effects` and feed their outcomes back into the state.
pub fn perform(state: &mut State, driver: &mut dyn Driver, effects: Vec<Effect>) {
    for e in effects {
        let outcome = match e {
            Effect::Answer { step, answers } => driver
                .answer(step, &answers)
                .map(|verdicts| vec![Msg::Checked { step, verdicts }]),
            Effect::Evidence {
                step,
                key,
                file,
                contents,
            } => driver.save(&file, &contents).and_then(|path| {
                let verdicts = driver.answer(step, &[(key.clone(), path.clone())])?;
                Ok(vec![
                    Msg::Saved { key, path },
                    Msg::Checked { step, verdicts },
                ])
            }),
        };
        let msgs = outcome.unwrap_or_else(|e| vec![Msg::Problem(format!("{e:#}"))]);
        for m in msgs {
            // Outcomes cause no further effects.
            state.update(m);
        }
    }
}

/// Run the app until the learner leaves or a signal comes; the state at
/// the end. `observed`: the user whose processes the panels list, when
/// not everyone's (a learner on a course server).
pub fn run(
    mut state: State,
    driver: &mut dyn Driver,
    observed: Option<u32>,
) -> anyhow::Result<State> {
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let focus = Arc::new(AtomicI32::new(0));
    let signals = signal_thread(tx.clone())?;
    let t0 = Instant::now();
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    {
        let (tx, focus, stop) = (tx.clone(), Arc::clone(&focus), Arc::clone(&stop));
        threads.push(std::thread::spawn(move || {
            collect::procs(tx, focus, stop, t0, observed)
        }));
    }
    let mut tracing = Tracing {
        running: None,
        observed,
    };
    let result = (|| -> anyhow::Result<()> {
        let mut guard = TerminalGuard::enter().context("cannot set up the terminal")?;
        {
            let (tx, stop) = (tx.clone(), Arc::clone(&stop));
            threads.push(std::thread::spawn(move || input(tx, stop)));
        }
        let mut last_check = Instant::now();
        loop {
            let (inst, pid) = state.wanted();
            focus.store(pid.unwrap_or(0), Ordering::Relaxed);
            tracing.sync(inst, pid, &tx);
            guard.terminal.draw(|f| view::render(f, &state))?;
            if state.quit {
                return Ok(());
            }
            let first = match rx.recv_timeout(Duration::from_secs(1)) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            };
            // Everything waiting, then one redraw.
            for msg in first.into_iter().chain(drain(&rx)) {
                let effects = state.update(msg);
                perform(&mut state, driver, effects);
            }
            if last_check.elapsed() >= Duration::from_secs(1) {
                last_check = Instant::now();
                if let Some(why) = driver.workload_stopped() {
                    anyhow::bail!(
                        "the lab's workload stopped on its own ({why}); run the lab again"
                    );
                }
                // Answers recorded from another shell (`kdiag answer`),
                // as the steps suggest for the files a shell command makes.
                match driver.changed() {
                    Ok(Some(given)) => state.update(Msg::Reloaded(given)),
                    Ok(None) => Vec::new(),
                    Err(e) => state.update(Msg::Problem(format!("{e:#}"))),
                };
            }
        }
    })();
    // Stop every thread and session before the terminal comes back.
    stop.store(true, Ordering::Relaxed);
    tracing.sync(None, None, &tx);
    signals.close();
    drop(tx);
    for t in threads {
        let _ = t.join();
    }
    result.map(|()| state)
}

fn drain(rx: &Receiver<Msg>) -> impl Iterator<Item = Msg> + '_ {
    std::iter::from_fn(|| rx.try_recv().ok())
}

/// SIGTERM, SIGHUP and SIGINT (outside raw mode) end the app like `q`.
fn signal_thread(tx: Sender<Msg>) -> anyhow::Result<signal_hook::iterator::Handle> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGHUP, SIGINT])
        .context("installing the signal handlers")?;
    let handle = signals.handle();
    std::thread::spawn(move || {
        for _ in signals.forever() {
            let _ = tx.send(Msg::Stop);
        }
    });
    Ok(handle)
}

/// Keys and resizes, until `stop`; a terminal that has gone away (its
/// window closed) is a `Stop` too.
fn input(tx: Sender<Msg>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        if hung_up(Duration::from_millis(200)) {
            let _ = tx.send(Msg::Stop);
            return;
        }
        while event::poll(Duration::ZERO).unwrap_or(false) {
            let msg = match event::read() {
                Ok(Event::Key(k)) => Key::from_event(k).map(Msg::Key),
                Ok(Event::Resize(..)) => Some(Msg::Resize),
                Ok(_) => None,
                Err(_) => Some(Msg::Stop),
            };
            if let Some(m) = msg
                && tx.send(m).is_err()
            {
                return;
            }
        }
    }
}

/// Wait up to `timeout` for terminal input; whether the terminal hung up.
/// (crossterm's own poll would spin on the endless end-of-file.)
fn hung_up(timeout: Duration) -> bool {
    let mut fd = libc::pollfd {
        fd: libc::STDIN_FILENO,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let rc = unsafe { libc::poll(&mut fd, 1, timeout.as_millis() as i32) };
    rc > 0 && fd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
}

/// The one tracing session running, for the panel on screen.
#[derive(Default)]
struct Tracing {
    running: Option<Running>,
    observed: Option<u32>,
}

struct Running {
    what: (Instrument, Option<i32>),
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Tracing {
    /// Make the session match what the screen shows: stop the old one
    /// (joining its thread, which detaches it) and start the new one.
    fn sync(&mut self, inst: Option<Instrument>, pid: Option<i32>, tx: &Sender<Msg>) {
        // iosnoop traces every process and is filtered on screen: a new
        // choice of process does not restart it.
        let want = inst.map(|i| (i, if i == Instrument::Iosnoop { None } else { pid }));
        if self.running.as_ref().map(|r| r.what) == want {
            return;
        }
        if let Some(r) = self.running.take() {
            r.stop.store(true, Ordering::Relaxed);
            let _ = r.thread.join();
        }
        let Some((inst, pid)) = want else {
            return;
        };
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, flag) = (tx.clone(), Arc::clone(&stop));
        let observed = self.observed;
        let thread = std::thread::spawn(move || match (inst, pid) {
            (Instrument::Iosnoop, _) => collect::iosnoop(tx, flag, observed),
            (Instrument::Profile, Some(pid)) => collect::profile(tx, pid, flag),
            (Instrument::ExecTrace, Some(pid)) => collect::exec_trace(tx, pid, flag),
            (Instrument::Offcpu, Some(pid)) => collect::offcpu(tx, pid, flag),
            _ => {}
        });
        self.running = Some(Running {
            what: (inst, pid),
            stop,
            thread,
        });
    }
}
