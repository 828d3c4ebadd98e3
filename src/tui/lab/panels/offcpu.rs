//! why: where the chosen process's threads waited off the CPU in the last
//! window (three seconds), as `kdiag offcpu` reports it: blocked time by
//! wait point, then the top blocking paths, the program's frames and the
//! kernel's.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::profile::keep_end;
use crate::analysis::{fold, offcpu};
use crate::model::profile::Profile;
use crate::render::offcpu::{duration, one_line};
use crate::tui::lab::markdown::code_style;

/// Wait points and paths shown.
const TOP: usize = 4;

#[derive(Debug, Clone, Default)]
pub struct Window {
    /// (PID recorded, its last window).
    last: Option<(i32, Profile)>,
    /// Lines scrolled off the top of the panel (a small window shows few).
    pub scroll: super::Scroll,
}

impl Window {
    pub fn absorb(&mut self, pid: i32, p: Profile) {
        self.last = Some((pid, p));
    }

    /// The last window of `pid`, if it has stacks.
    pub fn of(&self, pid: i32) -> Option<&Profile> {
        self.last
            .as_ref()
            .filter(|(p, prof)| *p == pid && !prof.stacks.is_empty())
            .map(|(_, prof)| prof)
    }

    /// The last window as folded stacks, as `kdiag offcpu --folded` writes.
    pub fn folded(&self, pid: i32) -> String {
        let mut text = self.of(pid).map(fold::fold).unwrap_or_default().join("\n");
        text.push('\n');
        text
    }

    pub fn draw(&self, f: &mut Frame, area: Rect, pid: i32, status: &str) {
        let Some(p) = self.of(pid) else {
            let text = format!(
                "Recording where PID {pid} waits: the first window comes after three seconds. {status}"
            );
            f.render_widget(Paragraph::new(text).wrap(Wrap { trim: false }), area);
            return;
        };
        let s = offcpu::summarize(p, TOP);
        let bold = Style::new().add_modifier(Modifier::BOLD);
        let mut lines = vec![
            Line::from(format!(
                "{} blocked in {} blocks over {:.0} s, summed over threads{}",
                duration(s.total_ns),
                s.blocks,
                p.cost.wall_secs,
                if status.is_empty() {
                    String::new()
                } else {
                    format!(" ({status})")
                }
            )),
            Line::from(Span::styled("Where threads waited", bold)),
        ];
        for w in &s.wait_points {
            lines.push(Line::from(format!(
                "  {:>5.1}% {:>9} {} {}",
                w.percent,
                duration(w.ns),
                w.state.letter(),
                w.function
            )));
        }
        lines.push(Line::from(Span::styled(
            "Top blocking paths (outermost first; [k] kernel, ↑ ↓ scroll)",
            bold,
        )));
        for path in &s.paths {
            lines.push(Line::from(format!(
                "  {:.1}% {} in {} blocks, state {}, {}",
                path.percent,
                duration(path.ns),
                path.blocks,
                path.state.letter(),
                path.comms.first().map_or("", String::as_str)
            )));
            // A name wider than the panel would be broken across lines:
            // it loses its start instead, where the function is not.
            let room = (area.width as usize).saturating_sub(4);
            let frames: Vec<String> = path.frames.iter().map(|f| keep_end(f, room)).collect();
            lines.push(Line::from(Span::styled(
                format!("    {}", one_line(&frames)),
                code_style(),
            )));
        }
        super::scrolled(f, area, lines, &self.scroll);
    }
}
