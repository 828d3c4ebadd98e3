//! The live instrument panels under a step's text, one file each (its
//! state and how it draws). `Panels` holds them all, takes the collectors'
//! data and draws the one a step shows; which instrument runs for which
//! panel is `instrument()`.

pub mod exec_trace;
pub mod io_pattern;
pub mod iosnoop;
pub mod offcpu;
pub mod process;
pub mod processes;
pub mod profile;
pub mod trend;

use std::cell::Cell;
use std::collections::HashMap;

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::event::{Data, Key};
use crate::model::lab::Panel;

/// A tracing session a panel needs, started only while it is on screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Instrument {
    Iosnoop,
    Profile,
    ExecTrace,
    Offcpu,
}

/// The instrument behind `panel`, beyond /proc (always read).
pub fn instrument(panel: Panel) -> Option<Instrument> {
    match panel {
        Panel::Iosnoop | Panel::IoPattern => Some(Instrument::Iosnoop),
        Panel::Profile => Some(Instrument::Profile),
        Panel::ExecTrace => Some(Instrument::ExecTrace),
        Panel::Offcpu => Some(Instrument::Offcpu),
        Panel::Processes | Panel::Process | Panel::Trend => None,
    }
}

/// The process the panels look at: the one picked in the process table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    pub pid: i32,
    pub comm: String,
}

#[derive(Debug, Clone, Default)]
pub struct Panels {
    pub processes: processes::Table,
    pub process: process::Rates,
    pub io: iosnoop::Requests,
    pub profile: profile::Windows,
    pub offcpu: offcpu::Window,
    pub exec: exec_trace::Trace,
    pub trend: trend::History,
    /// How each panel's instrument runs ("BPF tier, 0 lost"), or why not.
    pub status: HashMap<Panel, String>,
    pub failed: HashMap<Panel, String>,
    /// Lines scrolled away in a text panel (process, io-pattern,
    /// exec-trace): reset when another panel shows.
    pub text_scroll: Scroll,
}

impl Panels {
    /// Take a collector's batch; `chosen` is whom the profile is of.
    pub fn absorb(&mut self, data: Data, chosen: Option<&Chosen>) {
        match data {
            Data::Procs(s) => {
                self.trend.absorb(&s);
                self.processes.absorb(*s);
            }
            Data::Focus(s) => self.process.absorb(s),
            Data::Io(batch) => self.io.absorb(batch),
            Data::Profile(p) => {
                if let Some(c) = chosen {
                    self.profile.absorb(c.pid, *p);
                }
            }
            Data::Offcpu(p) => {
                if let Some(c) = chosen {
                    self.offcpu.absorb(c.pid, *p);
                }
            }
            Data::Exec(events, findings) => self.exec.absorb(events, findings),
            Data::Status(panel, s) => {
                self.failed.remove(&panel);
                self.status.insert(panel, s);
            }
            Data::Failed(panel, why) => {
                self.failed.insert(panel, why);
            }
        }
    }

    /// A key for the panel on screen; whether it used it.
    pub fn key(&mut self, panel: Panel, key: Key) -> bool {
        match panel {
            Panel::Processes => self.processes.key(key),
            Panel::Profile => self.profile.scroll.key(key),
            Panel::Offcpu => self.offcpu.scroll.key(key),
            Panel::Process | Panel::IoPattern | Panel::ExecTrace => self.text_scroll.key(key),
            Panel::Iosnoop | Panel::Trend => false,
        }
    }

    pub fn draw(&self, f: &mut Frame, area: Rect, panel: Panel, chosen: Option<&Chosen>) {
        if let Some(why) = self.failed.get(&panel) {
            let text = format!("This panel's instrument cannot run: {why}");
            f.render_widget(
                Paragraph::new(text).wrap(ratatui::widgets::Wrap { trim: false }),
                area,
            );
            return;
        }
        let status = self.status.get(&panel).map_or("", String::as_str);
        let pid = match (panel.needs_process(), chosen) {
            (false, _) => 0,
            (true, Some(c)) => c.pid,
            (true, None) => {
                f.render_widget(
                    Paragraph::new(
                        "No process chosen yet: pick one in the process table \
                         (the who step: select its row, Enter).",
                    )
                    .wrap(ratatui::widgets::Wrap { trim: false }),
                    area,
                );
                return;
            }
        };
        match panel {
            Panel::Processes => self.processes.draw(f, area, chosen.map(|c| c.pid)),
            Panel::Process => scrolled(
                f,
                area,
                self.process.lines(area.width, pid),
                &self.text_scroll,
            ),
            Panel::Iosnoop => self.io.draw(f, area, pid, status),
            Panel::IoPattern => scrolled(
                f,
                area,
                io_pattern::lines(&self.io, pid, status),
                &self.text_scroll,
            ),
            Panel::Profile => self.profile.draw(f, area, pid, status),
            Panel::ExecTrace => scrolled(f, area, self.exec.lines(status), &self.text_scroll),
            Panel::Offcpu => self.offcpu.draw(f, area, pid, status),
            Panel::Trend => self.trend.draw(f, area, pid),
        }
    }
}

/// A panel's lines, wrapped, from line `scroll` on; a marker line says when
/// more are above or below, so that at 80x24 no line a step needs is cut
/// without a word. Every panel that scrolls draws through it.
fn scrolled(f: &mut Frame, area: Rect, lines: Vec<Line<'static>>, scroll: &Scroll) {
    if area.height == 0 || area.width == 0 {
        return;
    }
    // Drawn on a tall page first: its height is the wrapped text's.
    let page_rect = Rect::new(0, 0, area.width, 500);
    let mut page = Buffer::empty(page_rect);
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .render(page_rect, &mut page);
    let blank = |y: u16| (0..area.width).all(|x| page[(x, y)].symbol() == " ");
    let total = (0..page_rect.height)
        .rev()
        .find(|&y| !blank(y))
        .map_or(0, |y| y as usize + 1);
    let h = area.height as usize;
    let (from, room) = if total <= h {
        scroll.reach(0);
        (0, h)
    } else {
        // One line for each marker shown; scrolled to the end, the last
        // lines take the place of the marker below (none is left).
        let from = scroll.reach(total - (h - 1).max(1));
        let room = h.saturating_sub(usize::from(from > 0));
        let rest = total - from;
        (
            from,
            if rest <= room {
                rest
            } else {
                room.saturating_sub(1).max(1)
            },
        )
    };
    let above = from > 0;
    let mut y = area.y;
    let marker = Style::new().add_modifier(Modifier::REVERSED);
    let mark = |f: &mut Frame, y: u16, text: String| {
        f.render_widget(
            Paragraph::new(Line::styled(text, marker)),
            Rect::new(area.x, y, area.width, 1),
        );
    };
    if above {
        mark(f, y, format!("↑ {from} more line(s) above (↑ Home)"));
        y += 1;
    }
    let buf = f.buffer_mut();
    for row in from..(from + room).min(total) {
        for x in 0..area.width {
            buf[(area.x + x, y)] = page[(x, row as u16)].clone();
        }
        y += 1;
    }
    let below = total.saturating_sub(from + room);
    if below > 0 {
        mark(f, y, format!("↓ {below} more line(s) below (↓ scrolls)"));
    }
}

/// Lines scrolled away in a pane, never past its last screenful: each draw
/// records how far it can go, so ↑ (or PgUp) after ↓ held at the end moves
/// at once instead of first undoing the presses that moved nothing.
#[derive(Debug, Clone, Default)]
pub struct Scroll {
    at: usize,
    /// The furthest `at` the last draw could show; None before any draw.
    end: Cell<Option<usize>>,
    /// Lines shown between the markers at the last draw: a page.
    page: Cell<Option<usize>>,
}

impl Scroll {
    /// Move by `lines` (negative: up), within what the last draw showed.
    pub fn by(&mut self, lines: isize) {
        let at = self.at.saturating_add_signed(lines);
        self.at = self.end.get().map_or(at, |end| at.min(end));
    }

    pub fn home(&mut self) {
        self.at = 0;
    }

    /// A page down (`1`) or up (`-1`): the lines the last draw showed
    /// between its markers, so that no line is skipped.
    pub fn page(&mut self, dir: isize) {
        self.by(dir * self.page.get().unwrap_or(5).max(1) as isize);
    }

    /// The draw shows `lines` lines between its markers.
    pub fn shows(&self, lines: usize) {
        self.page.set(Some(lines));
    }

    /// For a draw that can scroll up to `end` lines: the lines to skip.
    pub fn reach(&self, end: usize) -> usize {
        self.end.set(Some(end));
        self.at.min(end)
    }

    /// ↑ ↓ Home on a panel that scrolls; whether the key was one of them.
    fn key(&mut self, key: Key) -> bool {
        match key {
            Key::Down => self.by(1),
            Key::Up => self.by(-1),
            Key::Home => self.home(),
            _ => return false,
        }
        true
    }
}

/// `values` as a sparkline of block characters, the last `width` of them,
/// scaled to their own maximum.
pub fn spark(values: &[f64], width: usize) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let tail = &values[values.len().saturating_sub(width)..];
    let max = tail.iter().copied().fold(0.0, f64::max);
    tail.iter()
        .map(|&v| {
            if max <= 0.0 || v <= 0.0 {
                ' '
            } else {
                BARS[((v / max) * 7.0).round().clamp(0.0, 7.0) as usize]
            }
        })
        .collect()
}
