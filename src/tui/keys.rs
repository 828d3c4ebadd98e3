//! The keys kdiag's terminal apps (top, the lab) react to, from the
//! terminal's key events.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// The keys the app reacts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Up,
    Down,
    Left,
    Right,
    PageUp,
    PageDown,
    Home,
    End,
    Enter,
    Esc,
    Backspace,
    Tab,
    BackTab,
    CtrlC,
    /// Clears a text box (readline's kill-line).
    CtrlU,
}

impl Key {
    pub fn from_event(e: KeyEvent) -> Option<Key> {
        if e.kind == KeyEventKind::Release {
            return None;
        }
        Some(match e.code {
            KeyCode::Char('c') if e.modifiers.contains(KeyModifiers::CONTROL) => Key::CtrlC,
            KeyCode::Char('u') if e.modifiers.contains(KeyModifiers::CONTROL) => Key::CtrlU,
            // Another Ctrl or Alt chord is no letter to type or command to run.
            KeyCode::Char(_)
                if e.modifiers
                    .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
            {
                return None;
            }
            KeyCode::Char(c) => Key::Char(c),
            KeyCode::Up => Key::Up,
            KeyCode::Down => Key::Down,
            KeyCode::Left => Key::Left,
            KeyCode::Right => Key::Right,
            KeyCode::PageUp => Key::PageUp,
            KeyCode::PageDown => Key::PageDown,
            KeyCode::Home => Key::Home,
            KeyCode::End => Key::End,
            KeyCode::Enter => Key::Enter,
            KeyCode::Esc => Key::Esc,
            KeyCode::Backspace => Key::Backspace,
            KeyCode::Tab => Key::Tab,
            KeyCode::BackTab => Key::BackTab,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ctrl-U is a key of its own (it clears a text box); another Ctrl
    /// chord is not the letter: Ctrl-W typed no 'w' into an answer.
    #[test]
    fn ctrl_chords_are_not_letters() {
        let ctrl = |c| Key::from_event(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL));
        assert_eq!(ctrl('u'), Some(Key::CtrlU));
        assert_eq!(ctrl('c'), Some(Key::CtrlC));
        assert_eq!(ctrl('w'), None);
        let plain = KeyEvent::new(KeyCode::Char('u'), KeyModifiers::SHIFT);
        assert_eq!(Key::from_event(plain), Some(Key::Char('u')));
    }
}
