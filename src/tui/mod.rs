//! The ratatui front ends, drawing the same model data as `render`.

pub mod diagnose;
pub mod keys;
pub mod lab;
pub mod top;

use std::io::{self, Stdout};
use std::sync::Once;
use std::time::Duration;

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::{cursor, execute, terminal};

/// The terminal in raw mode on the alternate screen for as long as it lives.
/// Dropping it, or a panic anywhere, gives the user their terminal back.
pub struct TerminalGuard {
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl TerminalGuard {
    pub fn enter() -> io::Result<Self> {
        install_panic_hook();
        terminal::enable_raw_mode()?;
        let mut out = io::stdout();
        if let Err(e) = execute!(out, terminal::EnterAlternateScreen, cursor::Hide) {
            restore();
            return Err(e);
        }
        let terminal = Terminal::new(CrosstermBackend::new(out)).inspect_err(|_| restore())?;
        Ok(TerminalGuard { terminal })
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Leave raw mode and the alternate screen; safe to call more than once.
/// The frame is cleared first: a terminal resized while the app ran may
/// otherwise keep part of it when it switches back.
fn restore() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(
        io::stdout(),
        terminal::Clear(terminal::ClearType::All),
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
}

/// Restore the terminal before the panic message prints, so it is readable.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

#[derive(PartialEq, Eq)]
pub enum Input {
    /// Input waiting, or the timeout passed.
    Waited,
    /// The terminal's other side has gone (its window or tmux server closed):
    /// no SIGHUP need arrive, so kdiag must notice and leave.
    HungUp,
}

/// Wait up to `timeout` for terminal input.
pub fn wait_for_input(timeout: Duration) -> Input {
    let mut fd = libc::pollfd {
        fd: libc::STDIN_FILENO,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let rc = unsafe { libc::poll(&mut fd, 1, timeout.as_millis() as i32) };
    if rc > 0 && fd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        Input::HungUp
    } else {
        Input::Waited
    }
}
