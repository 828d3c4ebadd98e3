//! what: the chosen process's rates over the last seconds: CPU split into
//! user and system, storage bytes, page faults, context switches, and the
//! share of time its threads spent in each state (sampled every 20 ms),
//! each with a sparkline of the last half minute.

use std::collections::VecDeque;

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::spark;
use crate::analysis::top::human_bytes;

/// One second of the chosen process, from its counters at both ends and
/// its threads' states sampled in between.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FocusSample {
    /// Seconds since the lab started.
    pub secs: f64,
    pub pid: i32,
    pub comm: String,
    pub threads: usize,
    /// Percent of one CPU.
    pub user_pct: f64,
    pub sys_pct: f64,
    /// Bytes per second that reached storage; None when not readable.
    pub read_bps: Option<f64>,
    pub write_bps: Option<f64>,
    pub minflt_s: f64,
    pub majflt_s: f64,
    pub vcsw_s: f64,
    pub ivcsw_s: f64,
    pub rss_kib: u64,
    /// Share (0..1) of thread samples per state letter, largest first.
    pub states: Vec<(char, f64)>,
    /// Where sleeping threads waited (wait channel), largest share first.
    pub wchans: Vec<(String, f64)>,
    /// The process has exited.
    pub gone: bool,
}

/// A metric: its label, how to read it from a sample, how to show it.
type Row = (&'static str, fn(&FocusSample) -> f64, fn(f64) -> String);

/// How many seconds the panel keeps.
pub const KEEP: usize = 60;

#[derive(Debug, Clone, Default)]
pub struct Rates {
    pub samples: VecDeque<FocusSample>,
}

impl Rates {
    pub fn absorb(&mut self, s: FocusSample) {
        // Another process: start over.
        if self.samples.back().is_some_and(|b| b.pid != s.pid) {
            self.samples.clear();
        }
        self.samples.push_back(s);
        while self.samples.len() > KEEP {
            self.samples.pop_front();
        }
    }

    /// The panel's lines at `width` (Panels draws them, scrolled): the
    /// threads' states first, what the steps read most, then the rates.
    pub fn lines(&self, width: u16, pid: i32) -> Vec<Line<'static>> {
        let mine: Vec<&FocusSample> = self.samples.iter().filter(|s| s.pid == pid).collect();
        let Some(last) = mine.last() else {
            return vec![Line::from(
                "Measuring: the first rates come after one second.",
            )];
        };
        let mut lines = vec![Line::from(vec![
            Span::styled(
                format!("PID {} {}", last.pid, last.comm),
                Style::new().add_modifier(Modifier::BOLD),
            ),
            Span::raw(format!(
                " · {} thread(s) · RSS {}{}",
                last.threads,
                human_bytes(last.rss_kib as f64 * 1024.0),
                if last.gone { " · it has exited" } else { "" }
            )),
        ])];
        let states: Vec<String> = last
            .states
            .iter()
            .map(|(c, share)| format!("{} {:.0}%", state_name(*c), share * 100.0))
            .collect();
        lines.push(Line::from(format!("threads were: {}", states.join(", "))));
        if !last.wchans.is_empty() {
            let w: Vec<String> = last
                .wchans
                .iter()
                .take(3)
                .map(|(w, share)| format!("{w} {:.0}%", share * 100.0))
                .collect();
            lines.push(Line::from(format!("waiting in: {}", w.join(", "))));
        }
        let label_w = 18;
        let value_w = 10;
        let spark_w = (width as usize)
            .saturating_sub(label_w + value_w + 2)
            .min(30);
        let rows: [Row; 8] = [
            ("CPU user", |s| s.user_pct, |v| format!("{v:.1}%")),
            ("CPU system", |s| s.sys_pct, |v| format!("{v:.1}%")),
            (
                "read",
                |s| s.read_bps.unwrap_or(0.0),
                |v| format!("{}/s", human_bytes(v)),
            ),
            (
                "write",
                |s| s.write_bps.unwrap_or(0.0),
                |v| format!("{}/s", human_bytes(v)),
            ),
            ("minor faults", |s| s.minflt_s, |v| format!("{v:.0}/s")),
            ("major faults", |s| s.majflt_s, |v| format!("{v:.0}/s")),
            ("voluntary csw", |s| s.vcsw_s, |v| format!("{v:.0}/s")),
            ("involuntary csw", |s| s.ivcsw_s, |v| format!("{v:.0}/s")),
        ];
        lines.push(Line::from(format!(
            "{:<label_w$}{:>value_w$}  last {}s",
            "",
            "now",
            spark_w.min(mine.len())
        )));
        for (label, get, show) in rows {
            let values: Vec<f64> = mine.iter().map(|s| get(s)).collect();
            let unreadable = (label == "read" && last.read_bps.is_none())
                || (label == "write" && last.write_bps.is_none());
            let now = if unreadable {
                "-".to_string()
            } else {
                show(get(last))
            };
            lines.push(Line::from(format!(
                "{label:<label_w$}{now:>value_w$}  {}",
                spark(&values, spark_w)
            )));
        }
        lines
    }
}

/// A state letter as words.
pub fn state_name(c: char) -> &'static str {
    match c {
        'R' => "running (R)",
        'S' => "sleeping (S)",
        'D' => "disk wait (D)",
        'T' | 't' => "stopped (T)",
        'Z' => "zombie (Z)",
        'I' => "idle (I)",
        _ => "other",
    }
}
