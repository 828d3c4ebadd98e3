//! why: what the chosen process's recent block requests say about its I/O:
//! sequential or random, request sizes, sync and flush shares, and ranges
//! it rewrites again and again (`analysis::io_pattern`, worded as
//! `kdiag iosnoop` words it).

use ratatui::text::Line;

use super::iosnoop::Requests;
use crate::analysis::io_pattern;
use crate::render::iosnoop::pattern;

/// The panel's lines (Panels draws them, scrolled).
pub fn lines(requests: &Requests, pid: i32, status: &str) -> Vec<Line<'static>> {
    let mine = requests.of(pid);
    let mut text = Vec::new();
    let _ = pattern(&mut text, &io_pattern::pattern(&mine));
    let mut lines = vec![Line::from(format!(
        "The last {:.0} s of block requests of this process{}:",
        requests.span_secs(),
        if status.is_empty() {
            String::new()
        } else {
            format!(" ({status})")
        }
    ))];
    lines.extend(
        String::from_utf8_lossy(&text)
            .lines()
            .map(|l| Line::from(l.to_string())),
    );
    lines
}
