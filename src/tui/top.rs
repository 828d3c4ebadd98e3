//! `kdiag top`'s screen: pure `update(state, key)` and `render(frame, state)`
//! over the data the collector hands over, so both are testable without a
//! terminal.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table, TableState};

use crate::analysis::top::{self as analysis, Column, CpuSplit, TaskCounts, TopRow, human_bytes};
use crate::model::process::Details;
use crate::model::system::System;
pub use crate::tui::keys::Key;

/// One collected frame: what the header and table show.
#[derive(Debug, Clone, Default)]
pub struct Data {
    pub system: System,
    pub cpu: CpuSplit,
    pub tasks: TaskCounts,
    pub rows: Vec<TopRow>,
}

#[derive(Debug, Clone)]
pub struct State {
    pub data: Data,
    pub sort: Column,
    pub descending: bool,
    pub filter: String,
    /// Typing a filter after `/`.
    pub editing: bool,
    /// The selected process, kept across refreshes by PID.
    pub selected: Option<i32>,
    pub show_detail: bool,
    pub detail: Option<Details>,
    /// One row per thread (`H`) instead of per process.
    pub threads: bool,
    pub quit: bool,
}

impl Default for State {
    fn default() -> Self {
        State {
            data: Data::default(),
            sort: Column::Cpu,
            descending: true,
            filter: String::new(),
            editing: false,
            selected: None,
            show_detail: false,
            detail: None,
            threads: false,
            quit: false,
        }
    }
}

impl State {
    /// The table's rows: filtered, then sorted.
    pub fn visible(&self) -> Vec<TopRow> {
        let mut rows = self.data.rows.clone();
        analysis::filter(&mut rows, &self.filter);
        analysis::sort(&mut rows, self.sort, self.descending);
        rows
    }

    /// The PID whose details the panel should show.
    pub fn detail_pid(&self) -> Option<i32> {
        self.show_detail.then_some(self.selected).flatten()
    }

    fn selected_index(&self, rows: &[TopRow]) -> Option<usize> {
        let pid = self.selected?;
        rows.iter().position(|r| r.pid == pid)
    }
}

const PAGE: usize = 10;

/// Apply one key press.
pub fn update(state: &mut State, key: Key) {
    if key == Key::CtrlC {
        state.quit = true;
        return;
    }
    if state.editing {
        match key {
            Key::Char(c) => state.filter.push(c),
            Key::Backspace => {
                state.filter.pop();
            }
            Key::Enter => state.editing = false,
            Key::Esc => {
                state.editing = false;
                state.filter.clear();
            }
            _ => {}
        }
        return;
    }
    let rows = state.visible();
    let at = state.selected_index(&rows);
    let last = rows.len().saturating_sub(1);
    let go = |i: usize| rows.get(i.min(last)).map(|r| r.pid);
    match key {
        Key::Char('q') => state.quit = true,
        Key::Char('/') => state.editing = true,
        Key::Char('H') => state.threads = !state.threads,
        Key::Char(c) => {
            if let Some(col) = Column::from_key(c) {
                if state.sort == col {
                    state.descending = !state.descending;
                } else {
                    state.sort = col;
                    state.descending = col.descending_by_default();
                }
            }
        }
        Key::Down => state.selected = go(at.map_or(0, |i| i + 1)),
        Key::Up => state.selected = go(at.map_or(0, |i| i.saturating_sub(1))),
        Key::PageDown => state.selected = go(at.map_or(0, |i| i + PAGE)),
        Key::PageUp => state.selected = go(at.map_or(0, |i| i.saturating_sub(PAGE))),
        Key::Home => state.selected = go(0),
        Key::End => state.selected = go(last),
        Key::Enter => {
            if state.selected.is_none() {
                state.selected = go(0);
            }
            state.show_detail = !state.show_detail && state.selected.is_some();
        }
        Key::Esc => state.show_detail = false,
        _ => {}
    }
}

/// The five header lines, as top prints them.
pub fn header_lines(d: &Data) -> Vec<String> {
    let s = &d.system;
    let (t, c, m) = (&d.tasks, &d.cpu, &s.memory);
    let mib = |kib: u64| kib as f64 / 1024.0;
    let cache = m.buffers_kib + m.cached_kib;
    let used = m.total_kib.saturating_sub(m.free_kib + cache);
    vec![
        format!(
            "kdiag top - up {}, load average: {:.2}, {:.2}, {:.2}",
            uptime(s.uptime_secs),
            s.load[0],
            s.load[1],
            s.load[2]
        ),
        format!(
            "Tasks: {} total, {} running, {} sleeping, {} disk (D), {} stopped, {} zombie · threads: {} running, {} in D",
            t.total, t.running, t.sleeping, t.disk, t.stopped, t.zombie, t.threads_r, t.threads_d
        ),
        format!(
            "%Cpu(s): {:4.1} us, {:4.1} sy, {:4.1} ni, {:4.1} id, {:4.1} wa, {:4.1} hi, {:4.1} si, {:4.1} st",
            c.us, c.sy, c.ni, c.id, c.wa, c.hi, c.si, c.st
        ),
        format!(
            "MiB Mem : {:8.1} total, {:8.1} free, {:8.1} used, {:8.1} buff/cache",
            mib(m.total_kib),
            mib(m.free_kib),
            mib(used),
            mib(cache)
        ),
        format!(
            "MiB Swap: {:8.1} total, {:8.1} free, {:8.1} used. {:8.1} avail Mem",
            mib(m.swap_total_kib),
            mib(m.swap_free_kib),
            mib(m.swap_total_kib.saturating_sub(m.swap_free_kib)),
            mib(m.available_kib)
        ),
    ]
}

/// Uptime as top shows it: "3 days, 2:05" or "42 min".
pub fn uptime(secs: f64) -> String {
    let s = secs as u64;
    let (days, h, m) = (s / 86400, s % 86400 / 3600, s % 3600 / 60);
    let clock = if h > 0 {
        format!("{h}:{m:02}")
    } else {
        format!("{m} min")
    };
    match days {
        0 => clock,
        1 => format!("1 day, {clock}"),
        n => format!("{n} days, {clock}"),
    }
}

/// One table row's cells, in `Column::ALL` order. Unreadable I/O is "-".
pub fn cells(r: &TopRow) -> Vec<String> {
    let rate = |v: Option<f64>| v.map_or("-".to_owned(), human_bytes);
    vec![
        r.pid.to_string(),
        r.user.clone(),
        format!("{:.1}", r.cpu_percent),
        format!("{:.1}", r.mem_percent),
        human_bytes(r.res_kib as f64 * 1024.0),
        state_cell(r),
        rate(r.read_rate),
        rate(r.write_rate),
        format!("{:.0}", r.vcsw_rate),
        format!("{:.0}", r.ivcsw_rate),
        r.command.clone(),
    ]
}

/// A row's state, with how many of its threads are in it when it has
/// several: "D 12/20" (the main thread may well sleep meanwhile).
pub fn state_cell(r: &TopRow) -> String {
    crate::analysis::ps::state_text(r.state, r.in_state, r.threads)
}

/// A column's width: its widest cell (S: "D 12/20"; COMMAND: the least it
/// is given) and room for its title with the sort marker (`VCSW/s▼`).
pub fn column_width(c: Column, rows: &[TopRow]) -> u16 {
    let cells = match c {
        // pid_max's 4194304.
        Column::Pid => 7,
        Column::User | Column::Command => 8,
        Column::Cpu | Column::Mem => 5,
        Column::Res | Column::Vcsw => 6,
        Column::Read | Column::Write | Column::Ivcsw => 7,
        Column::State => rows
            .iter()
            .map(|r| state_cell(r).chars().count())
            .max()
            .unwrap_or(1),
    };
    cells.max(c.title().chars().count() + 1) as u16
}

/// The two key help lines: actions, then the sort keys.
pub fn help_lines(state: &State) -> [String; 2] {
    let keys: Vec<String> = Column::ALL
        .iter()
        .map(|c| format!("{}={}", c.key(), c.title()))
        .collect();
    let sort = format!("sort: {}", keys.join(" "));
    if state.editing {
        return [
            format!("filter: {}_  (Enter keep, Esc clear)", state.filter),
            sort,
        ];
    }
    let filter = if state.filter.is_empty() {
        String::new()
    } else {
        format!("  [filter: {}]", state.filter)
    };
    [
        format!(
            "q quit  / filter  ↑↓ select  Enter details  H {}  same sort key: reverse{filter}",
            if state.threads {
                "processes"
            } else {
                "threads"
            }
        ),
        sort,
    ]
}

/// The lines of the detail panel for the selected process.
pub fn detail_lines(d: &Details, row: Option<&TopRow>) -> Vec<String> {
    let secs = |ns: Option<u64>| ns.map_or("-".to_owned(), |n| format!("{:.3} s", n as f64 / 1e9));
    let name = row.map_or(String::new(), |r| r.comm.clone());
    let threads: Vec<String> = d
        .threads
        .iter()
        .map(|(tid, name, st)| format!("{tid} {name} {st}"))
        .collect();
    let wchan = match d.wchan.as_deref() {
        None => "- (not permitted)".to_owned(),
        Some("0") | Some("") => "- (running)".to_owned(),
        Some(w) => w.to_owned(),
    };
    vec![
        format!(
            "PID {} {name}: {} thread(s): {}",
            d.pid,
            d.threads.len(),
            threads.join(", ")
        ),
        format!(
            "wchan: {wchan}   on CPU: {}   run-queue wait: {}   timeslices: {}",
            secs(d.on_cpu_ns),
            secs(d.run_wait_ns),
            d.timeslices.map_or("-".to_owned(), |n| n.to_string())
        ),
        format!(
            "open fds: {}   cgroup: {}",
            d.open_fds
                .map_or("- (not permitted)".to_owned(), |n| n.to_string()),
            d.cgroup.as_deref().unwrap_or("-")
        ),
    ]
}

/// Draw the whole screen.
pub fn render(frame: &mut Frame, state: &State) {
    let detail_height = if state.detail_pid().is_some() { 5 } else { 0 };
    let [header, table, detail, help] = Layout::vertical([
        Constraint::Length(5),
        Constraint::Min(3),
        Constraint::Length(detail_height),
        Constraint::Length(2),
    ])
    .areas(frame.area());

    let lines: Vec<Line> = header_lines(&state.data)
        .into_iter()
        .map(Line::from)
        .collect();
    frame.render_widget(Paragraph::new(lines), header);

    let rows = state.visible();
    let titles = Column::ALL.map(|c| {
        let arrow = match (c == state.sort, state.descending) {
            (false, _) => "",
            (true, true) => "▼",
            (true, false) => "▲",
        };
        format!("{}{arrow}", c.title())
    });
    let head = Row::new(titles).style(Style::new().add_modifier(Modifier::REVERSED));
    let body = rows.iter().map(|r| {
        let style = match r.state {
            'D' => Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
            'Z' => Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
            _ => Style::new(),
        };
        Row::new(cells(r)).style(style)
    });
    let widths = Column::ALL.map(|c| match c {
        Column::Command => Constraint::Fill(1),
        _ => Constraint::Length(column_width(c, &rows)),
    });
    let t = Table::new(body, widths)
        .header(head)
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
    let mut ts = TableState::default().with_selected(state.selected_index(&rows));
    frame.render_stateful_widget(t, table, &mut ts);

    if let (Some(d), true) = (&state.detail, detail_height > 0) {
        let row = rows.iter().find(|r| Some(r.pid) == state.selected);
        let lines: Vec<Line> = detail_lines(d, row).into_iter().map(Line::from).collect();
        let block = Block::new()
            .borders(Borders::TOP)
            .title(" details (Esc closes) ");
        frame.render_widget(Paragraph::new(lines).block(block), detail);
    }
    let lines: Vec<Line> = help_lines(state).into_iter().map(Line::from).collect();
    frame.render_widget(Paragraph::new(lines), help);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::system::Memory;
    use ratatui::{Terminal, backend::TestBackend};

    fn row(pid: i32, comm: &str, state: char, cpu: f64, read: Option<f64>) -> TopRow {
        TopRow {
            pid,
            user: "root".into(),
            cpu_percent: cpu,
            mem_percent: 0.5,
            res_kib: 2048,
            state,
            in_state: 0,
            threads: 1,
            read_rate: read,
            write_rate: read.map(|r| r / 2.0),
            vcsw_rate: 12.0,
            ivcsw_rate: 1.0,
            comm: comm.into(),
            command: format!("/usr/bin/{comm} --flag"),
        }
    }

    /// The screen's text, one string per line.
    fn screen(term: &Terminal<TestBackend>) -> Vec<String> {
        let buf = term.backend().buffer();
        (0..buf.area.height)
            .map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect())
            .collect()
    }

    #[test]
    fn every_sort_column_shows_its_marker() {
        for c in Column::ALL {
            for descending in [true, false] {
                let mut state = fixture();
                state.sort = c;
                state.descending = descending;
                let mut term = Terminal::new(TestBackend::new(100, 13)).unwrap();
                term.draw(|f| render(f, &state)).unwrap();
                let marker = if descending { "▼" } else { "▲" };
                let head = &screen(&term)[5];
                assert!(head.contains(&format!("{}{marker} ", c.title())), "{head}");
            }
        }
    }

    fn fixture() -> State {
        let system = System {
            uptime_secs: 93_784.0,
            load: [2.5, 1.0, 0.25],
            memory: Memory {
                total_kib: 8 * 1024 * 1024,
                free_kib: 4 * 1024 * 1024,
                available_kib: 6 * 1024 * 1024,
                buffers_kib: 512 * 1024,
                cached_kib: 512 * 1024,
                swap_total_kib: 1024 * 1024,
                swap_free_kib: 1024 * 1024,
            },
            ..Default::default()
        };
        State {
            data: Data {
                system,
                cpu: CpuSplit {
                    us: 50.0,
                    sy: 10.0,
                    id: 35.0,
                    wa: 5.0,
                    ..Default::default()
                },
                tasks: TaskCounts {
                    total: 4,
                    running: 1,
                    sleeping: 1,
                    disk: 1,
                    stopped: 0,
                    zombie: 1,
                    threads_r: 1,
                    threads_d: 12,
                },
                rows: vec![
                    row(100, "busy", 'R', 99.5, Some(0.0)),
                    TopRow {
                        in_state: 12,
                        threads: 20,
                        ..row(200, "writer", 'D', 2.0, Some(4.0 * 1048576.0))
                    },
                    row(300, "defunct", 'Z', 0.0, None),
                    row(400, "idle", 'S', 0.0, Some(0.0)),
                ],
            },
            ..Default::default()
        }
    }

    #[test]
    fn snapshot_of_a_fixed_data_set() {
        let mut term = Terminal::new(TestBackend::new(100, 13)).unwrap();
        let mut state = fixture();
        update(&mut state, Key::Down);
        term.draw(|f| render(f, &state)).unwrap();
        // Text first (styles are checked cell by cell below).
        assert_eq!(
            screen(&term),
            [
                "kdiag top - up 1 day, 2:03, load average: 2.50, 1.00, 0.25                                          ",
                "Tasks: 4 total, 1 running, 1 sleeping, 1 disk (D), 0 stopped, 1 zombie · threads: 1 running, 12 in D",
                "%Cpu(s): 50.0 us, 10.0 sy,  0.0 ni, 35.0 id,  5.0 wa,  0.0 hi,  0.0 si,  0.0 st                     ",
                "MiB Mem :   8192.0 total,   4096.0 free,   3072.0 used,   1024.0 buff/cache                         ",
                "MiB Swap:   1024.0 total,   1024.0 free,      0.0 used.   6144.0 avail Mem                          ",
                "PID     USER     %CPU▼ %MEM  RES    S       READ/s  WRITE/s  VCSW/s  IVCSW/s  COMMAND               ",
                "100     root     99.5  0.5   2.0M   R       0       0        12      1        /usr/bin/busy --flag  ",
                "200     root     2.0   0.5   2.0M   D 12/20 4.0M    2.0M     12      1        /usr/bin/writer --flag",
                "300     root     0.0   0.5   2.0M   Z       -       -        12      1        /usr/bin/defunct --fla",
                "400     root     0.0   0.5   2.0M   S       0       0        12      1        /usr/bin/idle --flag  ",
                "                                                                                                    ",
                "q quit  / filter  ↑↓ select  Enter details  H threads  same sort key: reverse                       ",
                "sort: p=PID u=USER c=%CPU m=%MEM r=RES s=S i=READ/s w=WRITE/s v=VCSW/s n=IVCSW/s o=COMMAND          ",
            ]
        );
        // D and zombie rows stand out: colour and bold.
        let buf = term.backend().buffer();
        let d = &buf[(0, 7)];
        assert_eq!(d.fg, Color::Yellow);
        assert!(d.modifier.contains(Modifier::BOLD));
        let z = &buf[(0, 8)];
        assert_eq!(z.fg, Color::Red);
        assert!(z.modifier.contains(Modifier::BOLD));
        // The selected row (first after Down) is reversed.
        assert!(buf[(0, 6)].modifier.contains(Modifier::REVERSED));
    }

    #[test]
    fn detail_panel_and_filter() {
        let mut term = Terminal::new(TestBackend::new(100, 17)).unwrap();
        let mut state = fixture();
        for k in [
            Key::Char('/'),
            Key::Char('w'),
            Key::Char('r'),
            Key::Enter,
            Key::Enter,
        ] {
            update(&mut state, k);
        }
        assert_eq!(state.filter, "wr");
        assert_eq!(state.detail_pid(), Some(200));
        state.detail = Some(Details {
            pid: 200,
            threads: vec![(200, "writer".into(), 'D'), (201, "flush".into(), 'S')],
            wchan: Some("io_schedule".into()),
            on_cpu_ns: Some(1_500_000_000),
            run_wait_ns: Some(20_000_000),
            timeslices: Some(42),
            open_fds: Some(7),
            cgroup: Some("/system.slice/writer.service".into()),
        });
        term.draw(|f| render(f, &state)).unwrap();
        let text = screen(&term);
        assert!(text[6].starts_with("200 "), "{text:#?}");
        assert!(text[7].trim().is_empty(), "only the match: {text:#?}");
        assert!(
            text.iter()
                .any(|l| l.contains("PID 200 writer: 2 thread(s): 200 writer D, 201 flush S"))
        );
        assert!(text.iter().any(|l| l.contains(
            "wchan: io_schedule   on CPU: 1.500 s   run-queue wait: 0.020 s   timeslices: 42"
        )));
        assert!(
            text.iter()
                .any(|l| l.contains("open fds: 7   cgroup: /system.slice/writer.service"))
        );
        assert!(text[15].contains("[filter: wr]"));
    }

    #[test]
    fn keys() {
        let mut s = fixture();
        update(&mut s, Key::Char('p'));
        assert_eq!((s.sort, s.descending), (Column::Pid, false));
        update(&mut s, Key::Char('p'));
        assert!(s.descending);
        update(&mut s, Key::End);
        assert_eq!(s.selected, Some(100));
        update(&mut s, Key::Up);
        assert_eq!(s.selected, Some(200));
        update(&mut s, Key::Enter);
        assert_eq!(s.detail_pid(), Some(200));
        update(&mut s, Key::Esc);
        assert_eq!(s.detail_pid(), None);
        // While typing a filter, q is a letter; Ctrl-C still quits.
        update(&mut s, Key::Char('/'));
        update(&mut s, Key::Char('q'));
        assert!(!s.quit);
        assert_eq!(s.filter, "q");
        update(&mut s, Key::Esc);
        assert!(s.filter.is_empty());
        update(&mut s, Key::Char('q'));
        assert!(s.quit);
        let mut s = fixture();
        update(&mut s, Key::CtrlC);
        assert!(s.quit);
        assert_eq!(uptime(59.0 * 60.0), "59 min");
        assert_eq!(uptime(3.0 * 86400.0 + 3600.0), "3 days, 1:00");
    }
}
