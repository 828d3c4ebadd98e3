//! why: the chosen process's execs and those of its children, and what
//! exec-trace concludes about the failed ones (`analysis::exec_failure`):
//! the errno, the signal that followed and the cause elf-check finds.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;

use crate::analysis::exec_failure::Finding;
use crate::model::exec::TraceEvent;
use crate::render::exec::exec_call;

/// Events kept, newest last.
const MAX: usize = 500;

#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub events: Vec<TraceEvent>,
    pub findings: Vec<Finding>,
}

impl Trace {
    pub fn absorb(&mut self, events: Vec<TraceEvent>, findings: Vec<Finding>) {
        self.events.extend(events);
        let extra = self.events.len().saturating_sub(MAX);
        self.events.drain(..extra);
        if !findings.is_empty() {
            self.findings = findings;
        }
    }

    /// The panel's lines (Panels draws them, scrolled).
    pub fn lines(&self, status: &str) -> Vec<Line<'static>> {
        let execs: Vec<_> = self
            .events
            .iter()
            .filter_map(|e| match e {
                TraceEvent::Exec(x) => Some(x),
                _ => None,
            })
            .collect();
        let failed = execs.iter().filter(|x| x.ret != 0).count();
        let mut lines = vec![Line::from(format!(
            "{} execs seen, {failed} failed{}",
            execs.len(),
            if status.is_empty() {
                String::new()
            } else {
                format!(" · {status}")
            }
        ))];
        let problems: Vec<&Finding> = self.findings.iter().filter(|f| f.is_problem()).collect();
        if problems.is_empty() {
            lines.push(Line::from("No failed exec explained yet."));
        }
        for p in problems.iter().rev().take(2) {
            lines.push(Line::styled(
                "Explanation:",
                Style::new().add_modifier(Modifier::BOLD),
            ));
            lines.push(Line::from(p.text.clone()));
        }
        lines.push(Line::styled(
            "Latest execs:",
            Style::new().add_modifier(Modifier::BOLD),
        ));
        for x in execs.iter().rev().take(5) {
            let style = if x.ret != 0 {
                Style::new().fg(Color::Red)
            } else {
                Style::new()
            };
            lines.push(Line::styled(
                format!("{:>7} {}", x.pid, exec_call(x)),
                style,
            ));
        }
        lines
    }
}
