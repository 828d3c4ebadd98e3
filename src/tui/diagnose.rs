//! `kdiag diagnose --live`: the time series drawn as they arrive, one
//! sparkline per series that has moved off zero. Data flows one way: the
//! observer sends each interval's readings over a channel, `apply` adds
//! them, `render` draws; `update` reads keys. All three are pure; `show`
//! is the loop around them.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use ratatui::Frame;
use ratatui::crossterm::event::{self, Event};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::{Block, Paragraph, Sparkline};

use crate::analysis::trend::value_text;
use crate::model::trend::{Reading, Series, Trend};
use crate::tui::keys::Key;

/// A chart is at least this tall (borders and one line of bars).
const CHART_MIN_HEIGHT: u16 = 3;
/// Two columns of charts from this width on.
const TWO_COLUMNS: u16 = 80;

#[derive(Debug, Clone, Default)]
pub struct State {
    /// "PID 4242 (mem-leak) and its descendants".
    pub target: String,
    pub window_s: f64,
    pub elapsed_s: f64,
    pub trend: Trend,
    /// q: stop watching now, and report.
    pub quit: bool,
    /// Ctrl-C (raw mode turns it into a key): as a SIGINT would.
    pub interrupted: bool,
}

/// Apply one key press.
pub fn update(state: &mut State, key: Key) {
    match key {
        Key::Char('q') | Key::Esc => state.quit = true,
        Key::CtrlC => {
            state.quit = true;
            state.interrupted = true;
        }
        _ => {}
    }
}

/// Add one interval's readings.
pub fn apply(state: &mut State, r: &Reading) {
    state.trend.add(r);
}

pub fn render(frame: &mut Frame, state: &State) {
    let [head, body] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(frame.area());
    let title = format!(
        "kdiag diagnose {}: {:.0} of {:.0} s, a point every {} s   q: stop and report",
        state.target, state.elapsed_s, state.window_s, state.trend.interval_s
    );
    frame.render_widget(
        Paragraph::new(title).style(Style::new().add_modifier(Modifier::REVERSED)),
        head,
    );
    let shown: Vec<&Series> = state
        .trend
        .series
        .iter()
        .filter(|s| s.values().any(|v| v != 0.0))
        .collect();
    if shown.is_empty() {
        let wait = format!(
            "Waiting for the first point (every {} s) ...",
            state.trend.interval_s
        );
        frame.render_widget(Paragraph::new(wait), body);
        return;
    }
    let cols = if body.width >= TWO_COLUMNS { 2 } else { 1 };
    let rows = shown.len().div_ceil(cols) as u16;
    let height = (body.height / rows.max(1)).max(CHART_MIN_HEIGHT);
    let fit = (body.height / height) as usize;
    let row_areas = Layout::vertical(vec![Constraint::Length(height); fit]).split(body);
    for (row, chunk) in row_areas.iter().zip(shown.chunks(cols)) {
        let cells = Layout::horizontal(vec![Constraint::Ratio(1, cols as u32); cols]).split(*row);
        for (cell, s) in cells.iter().zip(chunk) {
            chart(frame, *cell, s);
        }
    }
}

/// One series: its name and latest value as the title, its most recent
/// points as bars (levels in bytes from their lowest, the rest from zero).
fn chart(frame: &mut Frame, area: Rect, s: &Series) {
    let title = format!(
        " {} {} ",
        s.name,
        value_text(s.last().unwrap_or(0.0), &s.unit)
    );
    let width = area.width.saturating_sub(2) as usize;
    let recent: Vec<f64> = s
        .values()
        .skip(s.points.len().saturating_sub(width))
        .collect();
    let hi = recent.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let lo = if s.unit == "B" {
        recent.iter().copied().fold(f64::INFINITY, f64::min)
    } else {
        0.0
    };
    let bars: Vec<u64> = recent
        .iter()
        .map(|&v| {
            if hi > lo {
                1 + ((v - lo) / (hi - lo) * 99.0).round() as u64
            } else {
                50
            }
        })
        .collect();
    frame.render_widget(
        Sparkline::default()
            .block(Block::bordered().title(title))
            .data(&bars)
            .max(100)
            .style(Style::new().fg(Color::Cyan)),
        area,
    );
}

/// Draw the series from `rx` until the observer ends (the channel closes),
/// or q stops it early (`stop` set). `interrupted` says a signal arrived:
/// the observer ends on its own then. The terminal is restored on return.
pub fn show(
    rx: Receiver<Reading>,
    mut state: State,
    stop: &AtomicBool,
    interrupted: &dyn Fn() -> bool,
) -> io::Result<State> {
    let mut guard = super::TerminalGuard::enter()?;
    let start = Instant::now();
    // Once the terminal's other side has gone, nothing is drawn or read.
    let mut hung_up = false;
    loop {
        state.elapsed_s = start.elapsed().as_secs_f64().min(state.window_s);
        if !hung_up {
            guard.terminal.draw(|f| render(f, &state))?;
            hung_up = super::wait_for_input(Duration::from_millis(100)) == super::Input::HungUp;
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
        while !hung_up && event::poll(Duration::ZERO)? {
            if let Event::Key(k) = event::read()?
                && let Some(key) = Key::from_event(k)
            {
                update(&mut state, key);
            }
        }
        if state.quit || hung_up || interrupted() {
            stop.store(true, Ordering::Relaxed);
        }
        loop {
            match rx.try_recv() {
                Ok(r) => apply(&mut state, &r),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return Ok(state),
            }
        }
    }
}
