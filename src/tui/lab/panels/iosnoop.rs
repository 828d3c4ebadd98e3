//! what: the block requests the chosen process caused, the newest last, as
//! `kdiag iosnoop` prints them, under the totals of the last seconds. The
//! same requests feed the I/O pattern panel (`io_pattern.rs`).

use std::collections::VecDeque;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use crate::analysis::io_pattern::{Totals, human_bytes};
use crate::model::block::BlockIo;
use crate::render::iosnoop::{Columns, header, row};

/// Requests older than this (by completion) are dropped.
pub const WINDOW_NS: u64 = 15_000_000_000;
/// At most this many requests are kept, whatever their age.
const MAX: usize = 50_000;

#[derive(Debug, Clone, Default)]
pub struct Requests {
    pub list: VecDeque<BlockIo>,
}

impl Requests {
    pub fn absorb(&mut self, batch: Vec<BlockIo>) {
        self.list.extend(batch);
        let newest = self.list.iter().map(|io| io.end_ns).max().unwrap_or(0);
        while self
            .list
            .front()
            .is_some_and(|io| io.end_ns + WINDOW_NS < newest)
            || self.list.len() > MAX
        {
            self.list.pop_front();
        }
    }

    /// The chosen process's requests, oldest first.
    pub fn of(&self, pid: i32) -> Vec<BlockIo> {
        self.list
            .iter()
            .filter(|io| io.pid as i32 == pid)
            .cloned()
            .collect()
    }

    /// Seconds between the first and the last completion kept.
    pub fn span_secs(&self) -> f64 {
        match (self.list.front(), self.list.back()) {
            (Some(a), Some(b)) => b.end_ns.saturating_sub(a.end_ns) as f64 / 1e9,
            _ => 0.0,
        }
    }

    pub fn draw(&self, f: &mut Frame, area: Rect, pid: i32, status: &str) {
        let mine = self.of(pid);
        let t = Totals::of(&mine);
        let secs = self.span_secs().max(1.0);
        let mut lines = vec![Line::from(format!(
            "last {secs:.0} s: {} requests of this process, {} read, {} written ({}/s){}",
            t.requests,
            human_bytes(t.read_bytes),
            human_bytes(t.write_bytes),
            human_bytes((t.bytes as f64 / secs) as u64),
            if status.is_empty() {
                String::new()
            } else {
                format!(" · {status}")
            }
        ))];
        lines.push(Line::styled(
            header(Columns::default()),
            Style::new().add_modifier(Modifier::REVERSED),
        ));
        let room = (area.height as usize).saturating_sub(lines.len());
        if mine.is_empty() {
            lines.push(Line::from(
                "No block requests from this process in the last seconds.",
            ));
        }
        let start = mine.len().saturating_sub(room);
        for io in &mine[start..] {
            lines.push(Line::from(row(io, Columns::default(), 0)));
        }
        f.render_widget(Paragraph::new(lines), area);
    }
}
