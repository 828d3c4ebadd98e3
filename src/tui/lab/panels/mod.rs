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

use std::collections::HashMap;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::widgets::Paragraph;

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
}

impl Panels {
    /// Take a collector's batch; `chosen` is whom the profile is of.
    pub fn absorb(&mut self, data: Data, chosen: Option<&Chosen>) {
        match data {
            Data::Procs(s) => {
                self.trend.absorb(&s);
                self.processes.sample = *s;
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
            Panel::Profile => scroll(&mut self.profile.scroll, key),
            Panel::Offcpu => scroll(&mut self.offcpu.scroll, key),
            _ => false,
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
            Panel::Process => self.process.draw(f, area, pid),
            Panel::Iosnoop => self.io.draw(f, area, pid, status),
            Panel::IoPattern => io_pattern::draw(f, area, &self.io, pid, status),
            Panel::Profile => self.profile.draw(f, area, pid, status),
            Panel::ExecTrace => self.exec.draw(f, area, status),
            Panel::Offcpu => self.offcpu.draw(f, area, pid, status),
            Panel::Trend => self.trend.draw(f, area, pid),
        }
    }
}

/// ↑ ↓ Home on a panel that scrolls; whether the key was one of them.
fn scroll(lines: &mut usize, key: Key) -> bool {
    match key {
        Key::Down => *lines += 1,
        Key::Up => *lines = lines.saturating_sub(1),
        Key::Home => *lines = 0,
        _ => return false,
    }
    true
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
