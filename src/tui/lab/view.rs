//! Drawing the lab app: the title bar with the score, the steps on the
//! side, the step's text (and write-up once done), its questions, the live
//! panel, the message and key lines, and the overlays (welcome, keys,
//! final screen). Pure: state in, frame out.

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use super::event::Verdict;
use super::markdown;
use super::panels::Scroll;
use super::state::{Overlay, State, Tone};
use crate::model::lab::Input;

const GOOD: Color = Color::Green;
const BAD: Color = Color::Red;
const HINT: Color = Color::Yellow;

pub fn render(f: &mut Frame, s: &State) {
    let notice = message_lines(s, f.area().width as usize);
    let [title, body, message, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(6),
        Constraint::Length(notice.len().max(1) as u16),
        Constraint::Length(1),
    ])
    .areas(f.area());
    title_bar(f, title, s);
    // Below 100 columns the steps list gives its room to the step (their
    // marks go in the step's heading): at 80x24 every column counts.
    if body.width >= 100 {
        let [side, main] =
            Layout::horizontal([Constraint::Length(28), Constraint::Min(20)]).areas(body);
        steps(f, side, s);
        step(f, main, s, false);
    } else {
        step(f, body, s, true);
    }
    f.render_widget(Paragraph::new(notice), message);
    f.render_widget(
        Paragraph::new(key_line(s, keys.width as usize))
            .style(Style::new().add_modifier(Modifier::DIM)),
        keys,
    );
    match s.overlay {
        Overlay::None => {}
        Overlay::Welcome => overlay(
            f,
            &format!(" Lab {}: {} ", s.lab.id, s.lab.title),
            &format!(
                "{}\n\n{} Each step's live panel shows kdiag's instruments \
                 watching the machine; answer the questions under the text. **?** lists the keys.\n\n\
                 Press any key to start.",
                s.lab.welcome.trim(),
                if f.area().width >= 100 {
                    "The steps are on the left."
                } else {
                    "The steps' marks are in the step's heading (✓ done)."
                }
            ),
        ),
        Overlay::Help => overlay(f, " Keys ", &help_text(s)),
        Overlay::Final => {
            let (got, max) = s.score(None);
            overlay(
                f,
                " Lab complete ",
                &format!(
                    "{}\n\n**Score: {} of {} points, {} of {} steps done.**\n\n\
                     Your answers are saved in `{}`. q leaves the lab (the workload stops); \
                     Esc goes back to the steps.",
                    s.lab.fin.trim(),
                    pts(got),
                    pts(max),
                    s.steps_done(),
                    s.lab.steps.len(),
                    s.lab.answers_file
                ),
            )
        }
    }
}

/// Points without a needless ".0".
fn pts(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn title_bar(f: &mut Frame, area: Rect, s: &State) {
    let (got, max) = s.score(None);
    let right = format!(
        "score {}/{} · {}/{} steps done ",
        pts(got),
        pts(max),
        s.steps_done(),
        s.lab.steps.len()
    );
    let left = format!(" kdiag lab {} · {}", s.lab.id, s.lab.title);
    let room = (area.width as usize).saturating_sub(right.chars().count());
    let left: String = left.chars().take(room.saturating_sub(1)).collect();
    let pad = room.saturating_sub(left.chars().count());
    let line = Line::from(vec![
        Span::styled(left, Style::new().add_modifier(Modifier::BOLD)),
        Span::raw(" ".repeat(pad)),
        Span::raw(right),
    ]);
    f.render_widget(
        Paragraph::new(line).style(Style::new().add_modifier(Modifier::REVERSED)),
        area,
    );
}

fn steps(f: &mut Frame, area: Rect, s: &State) {
    let block = Block::new().borders(Borders::RIGHT).title(" Steps ");
    let inner = block.inner(area);
    f.render_widget(block, area);
    let w = inner.width as usize;
    let mut lines = Vec::new();
    for (i, step) in s.lab.steps.iter().enumerate() {
        let answered = s.answers[i].iter().any(|a| !a.value.is_empty());
        let (mark, color) = if s.step_done(i) {
            ("✓", GOOD)
        } else if answered {
            ("◐", HINT)
        } else {
            ("○", Color::Reset)
        };
        let mut style = Style::new();
        if i == s.step {
            style = style.add_modifier(Modifier::REVERSED);
        }
        let name: String = format!(" {}. {}", i + 1, step.title)
            .chars()
            .take(w.saturating_sub(1))
            .collect();
        let pad = w.saturating_sub(1 + name.chars().count());
        lines.push(Line::from(vec![
            Span::styled(mark, style.fg(color)),
            Span::styled(name + &" ".repeat(pad), style),
        ]));
        let (got, max) = s.score(Some(i));
        let status = if s.step_done(i) {
            "done"
        } else if answered {
            "in progress"
        } else {
            "not started"
        };
        lines.push(Line::from(format!(
            "   {}/{} pts, {status}",
            pts(got),
            pts(max)
        )));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

/// The step's text, questions and panel, stacked; `marks`: the steps'
/// marks in the heading (no steps list beside it).
fn step(f: &mut Frame, area: Rect, s: &State, marks: bool) {
    let Some(step) = s.lab.steps.get(s.step) else {
        return;
    };
    let q_lines = question_lines(s, area.width.saturating_sub(1) as usize);
    let q_height = (q_lines.len() as u16 + 1).min(area.height / 2);
    // The write-up first once the step is done, then the text.
    let width = area.width.saturating_sub(2).max(8);
    let mut lines = Vec::new();
    if s.step_done(s.step) {
        lines.push(Line::styled(
            "── Done: what you found ──",
            Style::new().fg(GOOD).add_modifier(Modifier::BOLD),
        ));
        lines.extend(markdown::render(&step.explain, width));
        lines.push(Line::styled(
            "── The step ──",
            Style::new().add_modifier(Modifier::BOLD),
        ));
    }
    lines.extend(markdown::render(&s.step_text(s.step), width));
    // The text as tall as it needs, leaving the panel at least half of
    // what remains; the panel gets the rest.
    let rest = area.height.saturating_sub(q_height + 1);
    let text_height = if step.panels.is_empty() {
        rest
    } else {
        (lines.len() as u16).min(rest / 2).max(3.min(rest))
    };
    let [title, text, questions, panel] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(text_height),
        Constraint::Length(q_height),
        Constraint::Fill(1),
    ])
    .areas(area);
    let marks = if marks {
        let m: Vec<&str> = (0..s.lab.steps.len())
            .map(|i| if s.step_done(i) { "✓" } else { "○" })
            .collect();
        format!(" [{}]", m.join(""))
    } else {
        String::new()
    };
    let heading = format!(
        " Step {}/{}{marks}: {}",
        s.step + 1,
        s.lab.steps.len(),
        step.title,
    );
    f.render_widget(
        Paragraph::new(Span::styled(
            heading,
            Style::new().add_modifier(Modifier::BOLD),
        )),
        title,
    );
    text_pane(f, text, lines, &s.scroll);

    let block = Block::new().borders(Borders::TOP).title(" Questions ");
    let inner = block.inner(questions);
    f.render_widget(block, questions);
    f.render_widget(Paragraph::new(q_lines), inner);

    if let Some(p) = s.panel() {
        let more = if step.panels.len() > 1 {
            format!(" (v: panel {} of {})", s.panel + 1, step.panels.len())
        } else {
            String::new()
        };
        let who = match (&s.chosen, p.needs_process()) {
            (Some(c), true) => format!(" · PID {} {}", c.pid, c.comm),
            _ => String::new(),
        };
        let block = Block::new()
            .borders(Borders::TOP)
            .title(format!(" {}: {}{who}{more} ", step.id, p.title()))
            .border_style(Style::new().fg(Color::Blue));
        let inner = block.inner(panel);
        f.render_widget(block, panel);
        s.panels.draw(f, inner, p, s.chosen.as_ref());
    }
}

/// The step's text from line `scroll` on, a marker on the last line when
/// more is below (PgDn) and on the first when some is scrolled away (PgUp).
fn text_pane(f: &mut Frame, area: Rect, lines: Vec<Line<'static>>, scroll: &Scroll) {
    let area = area.inner(ratatui::layout::Margin::new(1, 0));
    let h = area.height as usize;
    if h == 0 {
        return;
    }
    let total = lines.len();
    // Never past the end: the last screenful stays on screen.
    let from = scroll.reach(total.saturating_sub(h.saturating_sub(1).max(1)));
    let above = from > 0;
    let room = h - usize::from(above);
    let below = total.saturating_sub(from + room);
    let room = if below > 0 {
        room.saturating_sub(1)
    } else {
        room
    };
    let below = total.saturating_sub(from + room);
    // A page is what shows between two markers: PgDn skips no line.
    scroll.shows(h.saturating_sub(2));
    let marker = Style::new().add_modifier(Modifier::DIM | Modifier::REVERSED);
    let mut shown = Vec::new();
    if above {
        shown.push(Line::styled(
            format!("↑ {from} more line(s) above: PgUp"),
            marker,
        ));
    }
    shown.extend(lines.into_iter().skip(from).take(room));
    if below > 0 {
        shown.push(Line::styled(
            format!("↓ {below} more line(s) below: PgDn"),
            marker,
        ));
    }
    f.render_widget(Paragraph::new(shown), area);
}

/// One line per question, then what is known about the one in focus.
fn question_lines(s: &State, width: usize) -> Vec<Line<'static>> {
    let step = &s.lab.steps[s.step];
    let mut lines = Vec::new();
    for (i, (q, a)) in step.questions.iter().zip(&s.answers[s.step]).enumerate() {
        let focus = i == s.question;
        let (mark, color) = match a.verdict {
            Verdict::Right => ("✓", GOOD),
            Verdict::NotYet(_) => ("✗", BAD),
            Verdict::Unanswered => ("·", Color::Reset),
        };
        let value = match (&s.editing, focus) {
            (Some(text), true) => format!("> {text}▏"),
            _ => value_text(&q.input, a.value.as_str(), a.choice, s.panel_saves()),
        };
        let points = if q.points > 0.0 {
            format!(
                "{} pt{}",
                pts(q.points),
                if q.points == 1.0 { "" } else { "s" }
            )
        } else {
            "live".to_string()
        };
        let lead = if focus { "▸ " } else { "  " };
        let mut style = Style::new();
        if focus {
            style = style.add_modifier(Modifier::BOLD);
        }
        let value = vec![
            Span::styled(value, Style::new().fg(Color::Cyan)),
            Span::styled(
                format!("  {points}"),
                Style::new().add_modifier(Modifier::DIM),
            ),
        ];
        let one_line = q.label.chars().count() + value.iter().map(|v| v.width()).sum::<usize>() + 6;
        let mut first = vec![
            Span::styled(lead, style),
            Span::styled(mark, Style::new().fg(color)),
        ];
        if one_line <= width {
            first.push(Span::styled(format!(" {}: ", q.label), style));
            first.extend(value);
            lines.push(Line::from(first));
        } else {
            // A label too long for the line wraps, its value below it.
            let label = format!("{}:", q.label);
            for (k, part) in wrap_words(&label, width.saturating_sub(5).max(10))
                .into_iter()
                .enumerate()
            {
                if k == 0 {
                    first.push(Span::styled(format!(" {part}"), style));
                    lines.push(Line::from(std::mem::take(&mut first)));
                } else {
                    lines.push(Line::styled(format!("    {part}"), style));
                }
            }
            let mut below = vec![Span::raw("      ")];
            below.extend(value);
            lines.push(Line::from(below));
        }
    }
    if let (Some(q), Some(a)) = (
        step.questions.get(s.question),
        s.answers[s.step].get(s.question),
    ) {
        if let Verdict::NotYet(m) = &a.verdict {
            lines.push(Line::styled(
                clip(&format!("    not yet: {m}"), width),
                Style::new().fg(BAD),
            ));
        }
        if a.hint_shown {
            lines.push(Line::styled(
                clip(&format!("    hint: {}", q.hint), width),
                Style::new().fg(HINT),
            ));
        }
    }
    lines
}

fn clip(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    s.chars().take(width.saturating_sub(1)).collect::<String>() + "…"
}

/// What a question shows in place of its value; `saves`: whether the
/// panel on screen can be saved as evidence.
fn value_text(input: &Input, value: &str, choice: Option<usize>, saves: bool) -> String {
    match input {
        Input::Choice { choices } => match choice.and_then(|i| choices.get(i)) {
            Some(c) => format!("◂ {c} ▸"),
            None if !value.is_empty() => format!("◂ {value} ▸"),
            None => "◂ ← → to choose ▸".into(),
        },
        _ if !value.is_empty() => value.to_string(),
        Input::Pick { .. } => "[Enter: the highlighted process]".into(),
        Input::Evidence if saves => "[Enter, Enter: save the panel's data as evidence]".into(),
        Input::Evidence => "[Enter to type your file's path]".into(),
        Input::Number { unit: Some(u) } => format!("[Enter to type a number of {u}]"),
        Input::Text | Input::Number { .. } => "[Enter to type]".into(),
    }
}

/// The notice, wrapped to `width` (three lines at most, the last cut).
fn message_lines(s: &State, width: usize) -> Vec<Line<'static>> {
    let Some((text, tone)) = &s.message else {
        return Vec::new();
    };
    let style = match tone {
        Tone::Good => Style::new().fg(GOOD).add_modifier(Modifier::BOLD),
        Tone::Bad => Style::new().fg(BAD).add_modifier(Modifier::BOLD),
        Tone::Info => Style::new().fg(HINT),
    };
    let mut lines = wrap_words(text, width.saturating_sub(1).max(10));
    if lines.len() > 3 {
        let rest = lines.split_off(2).join(" ");
        lines.push(clip(&rest, width.saturating_sub(1)));
    }
    lines
        .into_iter()
        .map(|l| Line::styled(format!(" {l}"), style))
        .collect()
}

/// `text` in lines of at most `width` characters, broken between words
/// (a word longer than a line is cut).
fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let fits = line.chars().count() + 1 + word.chars().count() <= width;
        if !line.is_empty() && !fits {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines.into_iter().map(|l| clip(&l, width)).collect()
}

/// The keys that matter now, as many as fit in `width`: the least
/// needed go first, `? keys` and `q quit` never.
pub fn key_line(s: &State, width: usize) -> String {
    if s.editing.is_some() {
        if evidence_in_focus(s) && s.panel_saves() {
            return " type the file's path · Enter alone saves the panel's data · Esc cancels"
                .into();
        }
        if evidence_in_focus(s) {
            return " type the file's path · Enter checks it · Esc cancels".into();
        }
        return " type the answer · Enter checks it · Esc cancels".into();
    }
    let mut keys = vec!["Tab question", "Enter answer"];
    if s.lab.steps[s.step]
        .questions
        .get(s.question)
        .is_some_and(|q| matches!(q.input, Input::Choice { .. }))
    {
        keys.push("←→ choose");
    }
    if s.panel() == Some(crate::model::lab::Panel::Processes) {
        keys.push("↑↓ select");
        keys.push("s sort");
    }
    keys.extend(["h hint", "n/p step", "? keys", "q quit"]);
    if s.lab.steps[s.step].panels.len() > 1 {
        keys.insert(2, "v panel");
    }
    // Dropped first when the line is too long: what ? lists anyway.
    for spare in ["n/p step", "h hint", "Tab question"] {
        if format!(" {}", keys.join(" · ")).chars().count() <= width {
            break;
        }
        keys.retain(|k| *k != spare);
    }
    format!(" {}", keys.join(" · "))
}

/// Whether the question in focus asks for evidence.
fn evidence_in_focus(s: &State) -> bool {
    s.lab.steps[s.step]
        .questions
        .get(s.question)
        .is_some_and(|q| q.input == Input::Evidence)
}

fn help_text(s: &State) -> String {
    format!(
        "- **Tab**, **Shift-Tab**: the next or previous question\n\
         - **Enter**: answer the question in focus: type it (Enter checks, Esc cancels, Ctrl-U clears), \
         take the process highlighted in the table, the choice shown (**← →** to change it), \
         or, for evidence, type a file's path (Enter alone saves the panel's data)\n\
         - **↑ ↓ Home End**: move in the panel (select a process, scroll)\n\
         - **s**, **r**: sort the process table by another column, reverse it\n\
         - **v**: the step's next panel, when it has several\n\
         - **PgUp**, **PgDn**: scroll the step's text\n\
         - **h**: one more hint\n\
         - **n**, **p**: the next or previous step\n\
         - **q**, **Ctrl-C**: leave (your answers stay; the workload stops)\n\n\
         Each answer is checked when you give it and saved in `{}`, the file `kdiag answer` \
         writes and `kdiag check` reads. Press any key to close.",
        s.lab.answers_file
    )
}

/// A centred box with markdown in it.
fn overlay(f: &mut Frame, title: &str, md: &str) {
    let area = f.area();
    let w = (area.width * 4 / 5).clamp(20.min(area.width), 100);
    let inner_w = w.saturating_sub(4);
    let lines = markdown::render(md, inner_w);
    let h = (lines.len() as u16 + 2).min(area.height.saturating_sub(2));
    let [row] = Layout::vertical([Constraint::Length(h)])
        .flex(Flex::Center)
        .areas(area);
    let [rect] = Layout::horizontal([Constraint::Length(w)])
        .flex(Flex::Center)
        .areas(row);
    f.render_widget(Clear, rect);
    let block = Block::bordered()
        .title(Span::styled(
            title.to_string(),
            Style::new().add_modifier(Modifier::BOLD),
        ))
        .style(Style::new());
    let inner = block.inner(rect).inner(ratatui::layout::Margin::new(1, 0));
    f.render_widget(block, rect);
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
}
