//! why: where the chosen process waits off the CPU. kdiag's off-CPU
//! instrument is not part of this build yet: the panel says so, and a lab
//! that names it still runs.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::widgets::{Paragraph, Wrap};

pub const NOT_AVAILABLE: &str = "Off-CPU analysis is not available yet in this kdiag: \
     the instrument that shows where a process waits is still being written. \
     Meanwhile the process panel's thread states and wait channels say where it sleeps.";

pub fn draw(f: &mut Frame, area: Rect) {
    f.render_widget(
        Paragraph::new(NOT_AVAILABLE).wrap(Wrap { trim: false }),
        area,
    );
}
