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
use crate::tui::top::{Data, cells, column_width};

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

/// Columns in the order they earn room after PID and the sort column
/// (always shown): USER early, so that a learner tells their process from
/// another user's.
const PRIORITY: [Column; 11] = [
    Column::Pid,
    Column::Cpu,
    Column::State,
    Column::Read,
    Column::Write,
    Column::Command,
    Column::User,
    Column::Vcsw,
    Column::Res,
    Column::Ivcsw,
    Column::Mem,
];

#[derive(Debug, Clone)]
pub struct Table {
    pub sample: ProcSample,
    pub sort: Column,
    pub descending: bool,
    /// The highlighted row, kept across refreshes by PID (Enter takes the
    /// process the learner saw highlighted, not the one that moved under
    /// it); a new sort order highlights its first row, so the view shows
    /// the top of the table.
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

    /// Take a new sample; the highlighted process stays the same (by PID)
    /// however the rows re-sort, the first row's until the learner moves.
    pub fn absorb(&mut self, sample: ProcSample) {
        self.sample = sample;
        let here = |pid: i32| self.sample.data.rows.iter().any(|r| r.pid == pid);
        if !self.selected.is_some_and(here) {
            self.top();
        }
    }

    /// Highlight the first row.
    fn top(&mut self) {
        self.selected = self.rows().first().map(|r| r.pid);
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
                let shown = shown(self.width.get(), &rows, self.sort);
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
                self.top();
            }
            Key::Char('r') => {
                self.descending = !self.descending;
                self.top();
            }
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
        let shown = shown(area.width, &rows, self.sort);
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

/// As many columns as fit in `width`: PID and `sort` always, then in the
/// order of PRIORITY; given in top's order, each as wide as top draws it
/// (its cells, its title with the sort marker). At 80 columns: PID USER
/// %CPU RES S READ/s WRITE/s VCSW/s COMMAND.
fn shown(width: u16, rows: &[TopRow], sort: Column) -> Vec<(Column, u16)> {
    let mut room = width;
    let mut shown: Vec<(Column, u16)> = Vec::new();
    let order = [Column::Pid, sort].into_iter().chain(
        PRIORITY
            .into_iter()
            .filter(|c| *c != sort && *c != Column::Pid),
    );
    for col in order {
        let w = column_width(col, rows);
        if w <= room || shown.len() < 3 {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pid: i32, state: char, in_state: u32, threads: u32) -> TopRow {
        TopRow {
            pid,
            user: "root".into(),
            cpu_percent: 1.0,
            mem_percent: 0.5,
            res_kib: 2048,
            state,
            in_state,
            threads,
            read_rate: Some(0.0),
            write_rate: Some(0.0),
            vcsw_rate: 1.0,
            ivcsw_rate: 1.0,
            comm: "app".into(),
            command: "/usr/bin/app".into(),
        }
    }

    /// At 80 columns (the whole width at 80x24) the table keeps what the
    /// steps sort by, USER and RES included, and s goes through those
    /// columns only.
    #[test]
    fn an_80_column_window_shows_and_sorts_what_the_steps_name() {
        fn titles(rows: &[TopRow], sort: Column) -> Vec<&'static str> {
            shown(80, rows, sort)
                .iter()
                .map(|(c, _)| c.title())
                .collect()
        }
        let rows = [row(4_194_304, 'S', 0, 1)];
        // What the steps name must show; more may, while there is room.
        let shown_titles = titles(&rows, Column::Cpu);
        for want in [
            "PID", "USER", "%CPU", "RES", "S", "READ/s", "WRITE/s", "VCSW/s", "COMMAND",
        ] {
            assert!(shown_titles.contains(&want), "{want} in {shown_titles:?}");
        }
        let used: u16 = shown(80, &rows, Column::Cpu)
            .iter()
            .map(|(_, w)| w + 1)
            .sum();
        assert!(used <= 81, "{used} columns used of 80: {shown_titles:?}");
        let mut t = Table::default();
        t.sample.data.rows = rows.to_vec();
        t.width.set(80);
        let mut seen = vec![];
        for _ in 0..10 {
            t.key(Key::Char('s'));
            seen.push(t.sort.title());
        }
        assert!(seen.contains(&"RES"), "{seen:?}");
        assert!(
            seen.iter().all(|c| titles(&rows, Column::Cpu).contains(c)),
            "{seen:?}"
        );
    }

    /// The sort column stays however narrow the window and wide the
    /// states ("D 20/22" on screen, sorted by RES).
    #[test]
    fn the_sort_column_never_disappears() {
        let rows = [row(4_194_304, 'D', 20, 22), row(7, 'S', 0, 1)];
        for width in [40, 60, 80] {
            for sort in SORTS {
                let cols: Vec<Column> = shown(width, &rows, sort).iter().map(|c| c.0).collect();
                assert!(cols.contains(&sort), "{width}: {sort:?} in {cols:?}");
                assert!(cols.contains(&Column::Pid), "{width}: {cols:?}");
            }
        }
    }

    /// The highlight follows its process when the rows re-sort; a new sort
    /// order highlights its first row (the view shows the top again).
    #[test]
    fn the_selection_stays_on_its_process() {
        fn sample(t: &mut Table, cpu: [f64; 2]) -> Option<i32> {
            let mut rows = [row(10, 'S', 0, 1), row(20, 'S', 0, 1)];
            rows[0].cpu_percent = cpu[0];
            rows[1].cpu_percent = cpu[1];
            t.absorb(ProcSample {
                secs: 0.0,
                data: Data {
                    rows: rows.to_vec(),
                    ..Default::default()
                },
            });
            t.selected_row().map(|r| r.pid)
        }
        let t = &mut Table::default();
        assert_eq!(sample(t, [5.0, 1.0]), Some(10));
        assert_eq!(sample(t, [1.0, 5.0]), Some(10), "first row then, not now");
        t.key(Key::Home);
        assert_eq!(t.selected_row().map(|r| r.pid), Some(20));
        t.key(Key::Down);
        assert_eq!(sample(t, [5.0, 1.0]), Some(10), "its process, now first");
        assert_eq!(sample(t, [1.0, 5.0]), Some(10), "its process, now second");
        t.key(Key::Char('r'));
        assert_eq!(
            t.selected_row().map(|r| r.pid),
            Some(10),
            "reversed: the top"
        );
        t.key(Key::Char('r'));
        assert_eq!(t.selected_row().map(|r| r.pid), Some(20), "the top again");
    }
}
