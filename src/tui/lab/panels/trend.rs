//! trend: the chosen process's CPU, I/O, RSS and context switches since the
//! lab started, one point a second, as sparklines with their range: a flat
//! line is a steady loop, a ramp a leak, teeth a periodic job.

use std::collections::{HashMap, VecDeque};

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Sparkline};

use super::processes::ProcSample;
use crate::analysis::top::human_bytes;

/// A chart: its label, its values, how to show one.
type Series = (&'static str, Vec<f64>, fn(f64) -> String);

/// Points kept per process: a quarter of an hour at one a second.
pub const KEEP: usize = 900;

/// One process at one sample.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Point {
    pub secs: f64,
    pub cpu: f64,
    pub io_bps: f64,
    pub rss_kib: u64,
    pub csw_s: f64,
}

#[derive(Debug, Clone, Default)]
pub struct History {
    pub by_pid: HashMap<i32, VecDeque<Point>>,
    /// The whole machine's busy CPU share (percent), per sample.
    pub system: VecDeque<(f64, f64)>,
}

impl History {
    pub fn absorb(&mut self, s: &ProcSample) {
        let live: std::collections::HashSet<i32> = s.data.rows.iter().map(|r| r.pid).collect();
        self.by_pid.retain(|pid, _| live.contains(pid));
        for r in &s.data.rows {
            let v = self.by_pid.entry(r.pid).or_default();
            v.push_back(Point {
                secs: s.secs,
                cpu: r.cpu_percent,
                io_bps: r.read_rate.unwrap_or(0.0) + r.write_rate.unwrap_or(0.0),
                rss_kib: r.res_kib,
                csw_s: r.vcsw_rate + r.ivcsw_rate,
            });
            if v.len() > KEEP {
                v.pop_front();
            }
        }
        self.system.push_back((s.secs, 100.0 - s.data.cpu.id));
        if self.system.len() > KEEP {
            self.system.pop_front();
        }
    }

    pub fn draw(&self, f: &mut Frame, area: Rect, pid: i32) {
        let Some(points) = self.by_pid.get(&pid).filter(|p| !p.is_empty()) else {
            f.render_widget(Paragraph::new("No samples of this process yet."), area);
            return;
        };
        let first = points.front().map_or(0.0, |p| p.secs);
        let last = points.back().map_or(0.0, |p| p.secs);
        let series: [Series; 4] = [
            ("CPU", points.iter().map(|p| p.cpu).collect(), |v| {
                format!("{v:.1}%")
            }),
            (
                "storage I/O",
                points.iter().map(|p| p.io_bps).collect(),
                |v| format!("{}/s", human_bytes(v)),
            ),
            (
                "RSS",
                points.iter().map(|p| p.rss_kib as f64 * 1024.0).collect(),
                human_bytes,
            ),
            (
                "context switches",
                points.iter().map(|p| p.csw_s).collect(),
                |v| format!("{v:.0}/s"),
            ),
        ];
        let sys = self.system.back().map_or(0.0, |s| s.1);
        let n = series.len() as u16;
        // A label over each chart while there is room (80x24 leaves about
        // eight lines); else each label beside its chart, so no chart is
        // ever dropped and the step's answer (a ramp, teeth, a flat line)
        // stays on screen.
        let stacked = area.height > 2 * n;
        // Too short even for a line each and the header: the charts first.
        let header = u16::from(area.height > n);
        let rows = Layout::vertical(std::iter::once(Constraint::Length(header)).chain(
            series.iter().map(|_| match stacked {
                true => Constraint::Fill(1),
                false => Constraint::Length(1),
            }),
        ))
        .split(area);
        f.render_widget(
            Paragraph::new(format!(
                "{} points, from {} to {} after the lab started · whole machine CPU now {sys:.0}% busy",
                points.len(),
                clock(first),
                clock(last)
            )),
            rows[0],
        );
        let heads: Vec<String> = series
            .iter()
            .map(|(label, values, show)| {
                let (min, max) = values
                    .iter()
                    .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
                let now = values.last().copied().unwrap_or(0.0);
                match stacked {
                    true => format!(
                        "{label}: now {}, min {}, max {}",
                        show(now),
                        show(min),
                        show(max)
                    ),
                    false => format!("{label} {} ({}–{}) ", show(now), show(min), show(max)),
                }
            })
            .collect();
        let beside = heads.iter().map(|h| h.chars().count()).max().unwrap_or(0) as u16;
        for (i, ((_, values, _), head_text)) in series.iter().zip(&heads).enumerate() {
            let area = rows[i + 1];
            let [head, chart] = match stacked {
                true => Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area),
                false => {
                    Layout::horizontal([Constraint::Length(beside), Constraint::Min(0)]).areas(area)
                }
            };
            f.render_widget(Paragraph::new(Line::from(head_text.as_str())), head);
            if chart.height == 0 || chart.width == 0 {
                continue;
            }
            let max = values.iter().copied().fold(f64::MIN, f64::max);
            let width = chart.width as usize;
            let tail = &values[values.len().saturating_sub(width)..];
            // Sparkline takes integers: scale so the range keeps its shape.
            let scale = if max > 0.0 { 1000.0 / max } else { 0.0 };
            let data: Vec<u64> = tail.iter().map(|v| (v * scale).round() as u64).collect();
            f.render_widget(
                Sparkline::default()
                    .data(&data)
                    .max(1000)
                    .style(Style::new().fg(Color::Green)),
                chart,
            );
        }
    }
}

/// Seconds as m:ss.
fn clock(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    format!("{}:{:02}", s / 60, s % 60)
}
