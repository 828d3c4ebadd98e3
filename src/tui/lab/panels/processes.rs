//! who: every process, as `kdiag top` shows them, sortable; the learner
//! moves the selection with the arrow keys and picks a process with Enter.

use std::cell::Cell;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Row, Table as TableWidget, TableState};

use crate::analysis::top::{self as analysis, Column, TopRow};
use crate::tui::keys::Key;
use crate::tui::top::{Data, cells, state_cell};

/// One sample of every process.
#[derive(Debug, Clone, Default)]
pub struct ProcSample {
    /// Seconds since the lab started.
    pub secs: f64,
    pub data: Data,
}

/// The columns `s` cycles through, in order.
const SORTS: [Column; 9] = [
    Column::Cpu,
    Column::Write,
    Column::Read,
    Column::Vcsw,
    Column::Ivcsw,
    Column::Res,
    Column::Mem,
    Column::Pid,
    Column::Command,
];

/// Columns by how much room they need to earn: the first ones always show.
const COLUMNS: [(Column, u16); 11] = [
    (Column::Pid, 7),
    (Column::Cpu, 5),
    (Column::State, 1),
    (Column::Read, 8),
    (Column::Write, 8),
    (Column::Command, 12),
    (Column::Vcsw, 6),
    (Column::Res, 6),
    (Column::Ivcsw, 7),
    (Column::User, 8),
    (Column::Mem, 5),
];

#[derive(Debug, Clone)]
pub struct Table {
    pub sample: ProcSample,
    pub sort: Column,
    pub descending: bool,
    /// The highlighted row, kept across refreshes by PID.
    pub selected: Option<i32>,
    /// The width last drawn at: `s` sorts only by the columns it shows.
    pub width: Cell<u16>,
}

impl Default for Table {
    fn default() -> Self {
        Table {
            sample: ProcSample::default(),
            sort: Column::Cpu,
            descending: true,
            selected: None,
            width: Cell::new(u16::MAX),
        }
    }
}

impl Table {
    /// The rows in display order.
    pub fn rows(&self) -> Vec<TopRow> {
        let mut rows = self.sample.data.rows.clone();
        analysis::sort(&mut rows, self.sort, self.descending);
        rows
    }

    /// The highlighted row (the first one until the learner moves).
    pub fn selected_row(&self) -> Option<TopRow> {
        let rows = self.rows();
        match self.selected {
            Some(pid) => rows.into_iter().find(|r| r.pid == pid),
            None => rows.into_iter().next(),
        }
    }

    /// Apply a key; whether it was one of the table's.
    pub fn key(&mut self, key: Key) -> bool {
        let rows = self.rows();
        let at = self
            .selected
            .and_then(|pid| rows.iter().position(|r| r.pid == pid));
        let last = rows.len().saturating_sub(1);
        let go = |i: usize| rows.get(i.min(last)).map(|r| r.pid);
        let page = 10;
        match key {
            Key::Down => self.selected = go(at.map_or(1, |i| i + 1)),
            Key::Up => self.selected = go(at.map_or(0, |i| i.saturating_sub(1))),
            Key::PageDown => self.selected = go(at.map_or(0, |i| i) + page),
            Key::PageUp => self.selected = go(at.map_or(0, |i| i.saturating_sub(page))),
            Key::Home => self.selected = go(0),
            Key::End => self.selected = go(last),
            Key::Char('s') => {
                let shown = shown(self.width.get(), &rows);
                let sorts: Vec<Column> = SORTS
                    .into_iter()
                    .filter(|c| shown.iter().any(|(s, _)| s == c))
                    .collect();
                let i = sorts
                    .iter()
                    .position(|c| *c == self.sort)
                    .map_or(0, |i| i + 1);
                self.sort = sorts
                    .get(i % sorts.len().max(1))
                    .copied()
                    .unwrap_or(Column::Cpu);
                self.descending = self.sort.descending_by_default();
            }
            Key::Char('r') => self.descending = !self.descending,
            _ => return false,
        }
        true
    }

    pub fn draw(&self, f: &mut Frame, area: Rect, chosen: Option<i32>) {
        let [head, body] =
            Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(area);
        let d = &self.sample.data;
        let (t, c) = (&d.tasks, &d.cpu);
        // The sort and the threads' states first, short enough for an
        // 80-column window (the steps point at both): what does not fit
        // is cut.
        let line = format!(
            "sorted by {}{} · threads {} running, {} in D (disk wait) · {} processes · CPU {:.0}% user, {:.0}% system, {:.0}% I/O wait · s sorts, r reverses",
            self.sort.title(),
            if self.descending { "▼" } else { "▲" },
            t.threads_r,
            t.threads_d,
            t.total,
            c.us,
            c.sy,
            c.wa,
        );
        f.render_widget(Paragraph::new(Line::from(line)), head);

        self.width.set(area.width);
        let rows = self.rows();
        let shown = shown(area.width, &rows);
        let titles = shown.iter().map(|(c, _)| {
            let arrow = match (*c == self.sort, self.descending) {
                (false, _) => "",
                (true, true) => "▼",
                (true, false) => "▲",
            };
            format!("{}{arrow}", c.title())
        });
        let header = Row::new(titles).style(Style::new().add_modifier(Modifier::REVERSED));
        let body_rows = rows.iter().map(|r| {
            let mut all = cells(r);
            // The program's name rather than its path: what the learner
            // looks for, and what fits.
            if let Some(last) = all.last_mut() {
                *last = command(r);
            }
            let cells: Vec<String> = shown
                .iter()
                .map(|(c, _)| {
                    let i = Column::ALL.iter().position(|a| a == c).unwrap_or(0);
                    all[i].clone()
                })
                .collect();
            let mut style = match r.state {
                'D' => Style::new().fg(Color::Yellow),
                'Z' => Style::new().fg(Color::Red),
                _ => Style::new(),
            };
            if Some(r.pid) == chosen {
                style = style.add_modifier(Modifier::BOLD).fg(Color::Green);
            }
            Row::new(cells).style(style)
        });
        let widths: Vec<Constraint> = shown
            .iter()
            .map(|(c, w)| match c {
                Column::Command => Constraint::Fill(1),
                _ => Constraint::Length(*w),
            })
            .collect();
        let table = TableWidget::new(body_rows, widths)
            .header(header)
            .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
        let at = match self.selected {
            Some(pid) => rows.iter().position(|r| r.pid == pid),
            None => (!rows.is_empty()).then_some(0),
        };
        let mut ts = TableState::default().with_selected(at);
        f.render_stateful_widget(table, body, &mut ts);
    }
}

/// As many columns as fit in `width`, in the order of COLUMNS, given in
/// top's order; S as wide as its widest cell ("D 12/20").
fn shown(width: u16, rows: &[TopRow]) -> Vec<(Column, u16)> {
    let mut room = width;
    let mut shown: Vec<(Column, u16)> = Vec::new();
    let state = rows.iter().map(|r| state_cell(r).len()).max().unwrap_or(1) as u16;
    for (col, w) in COLUMNS {
        let w = if col == Column::State { state } else { w };
        if w < room || shown.len() < 3 {
            room = room.saturating_sub(w + 1);
            shown.push((col, w));
        }
    }
    shown.sort_by_key(|(c, _)| Column::ALL.iter().position(|a| a == c));
    shown
}

/// A row's command line with the program's path replaced by its name.
fn command(r: &TopRow) -> String {
    if r.command.starts_with('[') {
        return r.command.clone();
    }
    let args = r.command.split_once(' ').map_or("", |(_, a)| a);
    if args.is_empty() {
        r.comm.clone()
    } else {
        format!("{} {args}", r.comm)
    }
}
