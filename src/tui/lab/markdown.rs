//! The markdown of lab steps as styled, wrapped terminal lines: headings,
//! paragraphs, `-`/`*`/`1.` lists with hanging indents, **strong**,
//! *emphasis*, `code` and code blocks (fenced or indented by four spaces).
//! Small on purpose: step texts use nothing else, and a line-exact result
//! is what the snapshot tests compare.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// One block of a document.
#[derive(Debug, Clone, PartialEq)]
enum Block {
    Heading(usize, String),
    Para(String),
    /// A list item: its marker ("•" or "1.") and its text.
    Item(String, String),
    Code(Vec<String>),
}

pub fn code_style() -> Style {
    Style::new().fg(Color::Cyan)
}

/// `md` as lines at most `width` cells wide.
pub fn render(md: &str, width: u16) -> Vec<Line<'static>> {
    let width = (width as usize).max(8);
    let mut out: Vec<Line<'static>> = Vec::new();
    let mut prev_item = false;
    for block in parse(md) {
        // Blocks are apart by a blank line; the items of one list are not.
        let item = matches!(block, Block::Item(..));
        if !(out.is_empty() || item && prev_item) {
            out.push(Line::default());
        }
        prev_item = item;
        match block {
            Block::Heading(level, text) => {
                let mut style = Style::new().add_modifier(Modifier::BOLD);
                if level == 1 {
                    style = style.add_modifier(Modifier::UNDERLINED);
                }
                out.extend(wrap(&inline(&text, style), width, "", ""));
            }
            Block::Para(text) => out.extend(wrap(&inline(&text, Style::new()), width, "", "")),
            Block::Item(marker, text) => {
                let first = format!("{marker} ");
                let rest = " ".repeat(first.chars().count());
                out.extend(wrap(&inline(&text, Style::new()), width, &first, &rest));
            }
            Block::Code(lines) => {
                for l in lines {
                    for piece in code_lines(&l, width) {
                        out.push(Line::from(Span::styled(piece, code_style())));
                    }
                }
            }
        }
    }
    out
}

/// Split the text into blocks.
fn parse(md: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut fence = false;
    let mut blank_before = true;
    for raw in md.lines() {
        let line = raw.trim_end();
        if line.trim_start().starts_with("```") {
            if !fence {
                blocks.push(Block::Code(Vec::new()));
            }
            fence = !fence;
            blank_before = false;
            continue;
        }
        if fence {
            if let Some(Block::Code(c)) = blocks.last_mut() {
                c.push(raw.to_string());
            }
            continue;
        }
        if line.is_empty() {
            blank_before = true;
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let text = line.trim_start();
        let in_code = matches!(blocks.last(), Some(Block::Code(_)));
        if indent >= 4 && (blank_before || in_code) {
            let code = line[4.min(line.len())..].to_string();
            match blocks.last_mut() {
                Some(Block::Code(c)) if !blank_before || in_code => c.push(code),
                _ => blocks.push(Block::Code(vec![code])),
            }
            blank_before = false;
            continue;
        }
        if let Some(h) = heading(text) {
            blocks.push(h);
        } else if let Some((marker, rest)) = list_item(text) {
            blocks.push(Block::Item(marker, rest.to_string()));
        } else {
            match blocks.last_mut() {
                Some(Block::Para(p) | Block::Item(_, p)) if !blank_before => {
                    p.push(' ');
                    p.push_str(text);
                }
                _ => blocks.push(Block::Para(text.to_string())),
            }
        }
        blank_before = false;
    }
    blocks
}

fn heading(text: &str) -> Option<Block> {
    let level = text.chars().take_while(|&c| c == '#').count();
    let rest = text.get(level..)?;
    (level > 0 && level <= 6 && rest.starts_with(' '))
        .then(|| Block::Heading(level, rest.trim().to_string()))
}

fn list_item(text: &str) -> Option<(String, &str)> {
    if let Some(rest) = text.strip_prefix("- ").or_else(|| text.strip_prefix("* ")) {
        return Some(("•".to_string(), rest.trim_start()));
    }
    let digits = text.chars().take_while(char::is_ascii_digit).count();
    let rest = text.get(digits..)?.strip_prefix(". ")?;
    (digits > 0).then(|| (text[..digits + 1].to_string(), rest.trim_start()))
}

/// A code line as screen lines of at most `width` cells, indented by two:
/// a command too long for one is continued shell-style (a backslash at
/// the end of the line, the rest indented), never cut short.
fn code_lines(line: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest: Vec<char> = line.chars().collect();
    let mut indent = "  ";
    while indent.len() + rest.len() > width {
        // Room for the text, a space and the backslash.
        let room = width.saturating_sub(indent.len() + 2).max(1);
        let cut = rest[..room.min(rest.len())]
            .iter()
            .rposition(|c| *c == ' ')
            .filter(|&i| i > 0)
            .unwrap_or(room.min(rest.len()));
        let head: String = rest[..cut].iter().collect();
        out.push(format!("{indent}{} \\", head.trim_end()));
        rest = rest[cut..]
            .iter()
            .copied()
            .skip_while(|c| *c == ' ')
            .collect();
        indent = "      ";
    }
    out.push(format!("{indent}{}", rest.iter().collect::<String>()));
    out
}

/// Inline markup as styled pieces: `code`, **strong**, *em* and _em_.
fn inline(text: &str, base: Style) -> Vec<(String, Style)> {
    let mut out: Vec<(String, Style)> = Vec::new();
    let mut cur = String::new();
    let (mut strong, mut em) = (false, false);
    let style = |strong: bool, em: bool| {
        let mut s = base;
        if strong {
            s = s.add_modifier(Modifier::BOLD);
        }
        if em {
            s = s.add_modifier(Modifier::ITALIC);
        }
        s
    };
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let flush = |cur: &mut String, out: &mut Vec<(String, Style)>, s: Style| {
        if !cur.is_empty() {
            out.push((std::mem::take(cur), s));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '`'
            && let Some(len) = chars[i + 1..].iter().position(|&d| d == '`')
        {
            flush(&mut cur, &mut out, style(strong, em));
            let code: String = chars[i + 1..i + 1 + len].iter().collect();
            out.push((code, code_style().patch(style(strong, em))));
            i += len + 2;
            continue;
        }
        if c == '*' && chars.get(i + 1) == Some(&'*') {
            flush(&mut cur, &mut out, style(strong, em));
            strong = !strong;
            i += 2;
            continue;
        }
        // A lone * or _ toggles emphasis only at a word's edge, so
        // snake_case names and `2 * 3` stay as written.
        if c == '*' || c == '_' {
            let before = i.checked_sub(1).map(|j| chars[j]);
            let after = chars.get(i + 1).copied();
            let opens = !em
                && before.is_none_or(|b| !b.is_alphanumeric())
                && after.is_some_and(|a| !a.is_whitespace());
            let closes = em
                && before.is_some_and(|b| !b.is_whitespace())
                && after.is_none_or(|a| !a.is_alphanumeric());
            if opens || closes {
                flush(&mut cur, &mut out, style(strong, em));
                em = !em;
                i += 1;
                continue;
            }
        }
        cur.push(c);
        i += 1;
    }
    flush(&mut cur, &mut out, style(strong, em));
    out
}

/// Greedy word wrap of styled pieces; `first` prefixes the first line and
/// `rest` the others (a list item's hanging indent). A code piece that fits
/// on a line is never broken.
fn wrap(pieces: &[(String, Style)], width: usize, first: &str, rest: &str) -> Vec<Line<'static>> {
    // Words: runs of text with the space before them.
    let mut words: Vec<(bool, String, Style)> = Vec::new(); // (space before, text, style)
    let code = code_style().fg;
    let mut space = false;
    for (text, style) in pieces {
        if style.fg == code && text.chars().count() + rest.chars().count() <= width {
            words.push((
                space || text.starts_with(' '),
                text.trim().to_string(),
                *style,
            ));
            space = false;
            continue;
        }
        let mut word = String::new();
        for c in text.chars() {
            if c == ' ' {
                if !word.is_empty() {
                    words.push((space, std::mem::take(&mut word), *style));
                }
                space = true;
            } else {
                word.push(c);
            }
        }
        if !word.is_empty() {
            words.push((space, word, *style));
            space = false;
        }
    }
    let mut lines = Vec::new();
    let mut spans: Vec<Span<'static>> = vec![Span::raw(first.to_string())];
    let mut used = first.chars().count();
    let mut empty = true;
    for (space_before, word, style) in words {
        let mut word = word;
        loop {
            let len = word.chars().count();
            let gap = usize::from(space_before && !empty);
            if used + gap + len <= width {
                if gap == 1 {
                    spans.push(Span::raw(" "));
                }
                used += gap + len;
                spans.push(Span::styled(word, style));
                empty = false;
                break;
            }
            if empty {
                // Longer than a whole line: break it.
                let room = width.saturating_sub(used).max(1);
                let head: String = word.chars().take(room).collect();
                word = word.chars().skip(room).collect();
                spans.push(Span::styled(head, style));
            }
            lines.push(Line::from(std::mem::take(&mut spans)));
            spans.push(Span::raw(rest.to_string()));
            used = rest.chars().count();
            empty = true;
            if word.is_empty() {
                break;
            }
        }
    }
    if !empty || lines.is_empty() {
        lines.push(Line::from(spans));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: &[Line]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn blocks_wrap_with_hanging_indents() {
        let md = "# Title\nFind the process behind\nthe disk activity.\n\n\
                  - `kdiag top` shows processes by CPU; press Enter\n  on one.\n\
                  - second item\n\n    kdiag answer 0-demo who.pid <PID>\n\n1. one\n";
        let lines = render(md, 30);
        assert_eq!(
            text(&lines),
            [
                "Title",
                "",
                "Find the process behind the",
                "disk activity.",
                "",
                "• kdiag top shows processes by",
                "  CPU; press Enter on one.",
                "• second item",
                "",
                // Continued, not cut.
                "  kdiag answer 0-demo \\",
                "      who.pid <PID>",
                "",
                "1. one",
            ]
        );
        // Styles: the heading bold and underlined, code cyan.
        let h = &lines[0].spans[1];
        assert!(
            h.style
                .add_modifier
                .contains(Modifier::BOLD | Modifier::UNDERLINED)
        );
        let code = lines[5]
            .spans
            .iter()
            .find(|s| s.content == "kdiag top")
            .unwrap();
        assert_eq!(code.style.fg, Some(Color::Cyan));
        assert_eq!(lines[9].spans[0].style.fg, Some(Color::Cyan));
    }

    #[test]
    fn long_commands_wrap_shell_style() {
        let cmd = "kdiag time -v -o fork.txt kdiag workload run scheduling 1 --seed sched-a-1";
        let lines = code_lines(cmd, 40);
        assert!(lines.iter().all(|l| l.chars().count() <= 40), "{lines:?}");
        assert!(lines[..lines.len() - 1].iter().all(|l| l.ends_with(" \\")));
        let joined: Vec<&str> = lines
            .iter()
            .map(|l| l.trim().trim_end_matches('\\').trim())
            .collect();
        assert_eq!(joined.join(" "), cmd);
        assert_eq!(code_lines("ls", 40), ["  ls"]);
    }

    #[test]
    fn inline_emphasis_and_code_stay_whole() {
        let p = inline("**bold** and *em* but snake_case and `a b`", Style::new());
        let names: Vec<(&str, bool, bool)> = p
            .iter()
            .map(|(t, s)| {
                (
                    t.as_str(),
                    s.add_modifier.contains(Modifier::BOLD),
                    s.add_modifier.contains(Modifier::ITALIC),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("bold", true, false),
                (" and ", false, false),
                ("em", false, true),
                (" but snake_case and ", false, false),
                ("a b", false, false),
            ]
        );
        // A code span that fits moves to the next line whole.
        let lines = render("abc defgh `x y z`", 12);
        assert_eq!(text(&lines), ["abc defgh", "x y z"]);
        // Fenced code keeps its spaces.
        let lines = render("```\n  a  b\n```", 20);
        assert_eq!(text(&lines), ["    a  b"]);
    }
}
