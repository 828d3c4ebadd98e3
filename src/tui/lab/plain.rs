//! `kdiag lab --plain`: the same lab, one command a line on stdin and each
//! reply on stdout, for screen readers, scripts and tests. It drives the
//! same state as the app (answers checked as given, hints one at a time),
//! so both agree on every verdict.
//!
//! Commands: `answer KEY VALUE`, `check`, `hint`, `next`, `prev`, `step`,
//! `status`, `help`, `quit` (end of input and Ctrl-C quit too).

use std::io::Write;

use super::app::{Driver, perform};
use super::event::{Key, Msg, Verdict};
use super::markdown;
use super::state::{Overlay, State};
use crate::model::lab::{Input, PickColumn};

/// The width the step texts are wrapped to.
const WIDTH: u16 = 78;

pub const HELP: &str =
    "commands: answer KEY VALUE | check | hint | next | prev | step | status | help | quit";

/// Standard output and, with --log, the transcript file: every byte to
/// both.
pub struct Transcript<'a> {
    pub out: &'a mut dyn Write,
    pub log: Option<&'a std::fs::File>,
}

impl Write for Transcript<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(mut f) = self.log {
            f.write_all(buf)?;
        }
        self.out.write_all(buf)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// `next_line` gives each command as typed, None at the end of input (or
/// when the learner leaves with Ctrl-C).
pub fn run(
    mut state: State,
    driver: &mut dyn Driver,
    next_line: &mut dyn FnMut() -> std::io::Result<Option<String>>,
    out: &mut dyn Write,
    prompt: bool,
) -> anyhow::Result<State> {
    // The welcome is printed here, not waited on.
    state.overlay = Overlay::None;
    writeln!(out, "== Lab {}: {} ==", state.lab.id, state.lab.title)?;
    write_md(out, &state.lab.welcome)?;
    writeln!(out, "Your answers are saved in {}.", state.lab.answers_file)?;
    writeln!(out, "{HELP}")?;
    step(out, &state)?;
    loop {
        if prompt {
            write!(out, "lab> ")?;
        }
        out.flush()?;
        let Some(line) = next_line()? else {
            if prompt {
                writeln!(out)?;
            }
            break;
        };
        if let Some(why) = driver.workload_stopped() {
            anyhow::bail!("the lab's workload stopped on its own ({why}); run the lab again");
        }
        let line = line.trim();
        let (cmd, rest) = line.split_once(' ').unwrap_or((line, ""));
        match cmd {
            "" => {}
            "answer" | "a" => {
                let (key, value) = rest.trim().split_once(' ').unwrap_or((rest.trim(), ""));
                answer(&mut state, driver, out, key, value.trim())?;
            }
            "check" | "c" => check(&mut state, driver, out)?,
            "hint" | "h" => {
                state.update(Msg::Key(Key::Char('h')));
                message(out, &mut state)?;
            }
            "next" | "n" => {
                let at = state.step;
                state.update(Msg::Key(Key::Char('n')));
                if state.step != at {
                    step(out, &state)?;
                } else if state.all_done() {
                    finish(out, &state)?;
                } else {
                    message(out, &mut state)?;
                }
            }
            "prev" | "p" => {
                state.update(Msg::Key(Key::Char('p')));
                step(out, &state)?;
            }
            "step" | "show" => step(out, &state)?,
            "status" | "s" => status(out, &state)?,
            "help" | "?" => writeln!(out, "{HELP}")?,
            "quit" | "q" | "exit" => break,
            other => writeln!(out, "{other:?} is not a command; {HELP}")?,
        }
    }
    Ok(state)
}

fn write_md(out: &mut dyn Write, md: &str) -> std::io::Result<()> {
    for l in markdown::render(md, WIDTH) {
        writeln!(out, "{}", l.to_string().trim_end())?;
    }
    Ok(())
}

/// The step on screen: its text, its questions and how to answer them.
fn step(out: &mut dyn Write, s: &State) -> std::io::Result<()> {
    let st = &s.lab.steps[s.step];
    writeln!(
        out,
        "\n-- Step {}/{}: {} --",
        s.step + 1,
        s.lab.steps.len(),
        st.title
    )?;
    write_md(out, &s.step_text(s.step))?;
    if s.step_done(s.step) {
        writeln!(out, "\nDone. What you found:")?;
        write_md(out, &st.explain)?;
    }
    writeln!(out, "\nQuestions (answer KEY VALUE):")?;
    for (q, a) in st.questions.iter().zip(&s.answers[s.step]) {
        let form = match &q.input {
            Input::Pick {
                column: PickColumn::Pid,
            } => "a PID".to_string(),
            Input::Pick {
                column: PickColumn::Comm,
            } => "a process name".to_string(),
            Input::Choice { choices } => format!("one of: {}", choices.join(", ")),
            Input::Number { unit: Some(u) } => format!("a number of {u}"),
            Input::Number { unit: None } => "a number".to_string(),
            Input::Evidence => "the path of a file you saved".to_string(),
            Input::Text => "text".to_string(),
        };
        let state = match &a.verdict {
            Verdict::Right => "right".to_string(),
            Verdict::NotYet(_) => "not yet".to_string(),
            Verdict::Unanswered => "open".to_string(),
        };
        let points = if q.points > 0.0 {
            format!("{} pt{}", q.points, if q.points == 1.0 { "" } else { "s" })
        } else {
            "live".into()
        };
        writeln!(
            out,
            "  {:<20} {} ({form}; {points}; {state})",
            q.key, q.label
        )?;
    }
    let shell: Vec<&str> = st
        .questions
        .iter()
        .map(|q| q.shell.as_str())
        .filter(|c| !c.is_empty())
        .collect();
    if !shell.is_empty() {
        writeln!(out, "Or from another terminal, then `check`:")?;
        for c in shell {
            writeln!(out, "    {c}")?;
        }
    }
    Ok(())
}

fn message(out: &mut dyn Write, s: &mut State) -> std::io::Result<()> {
    if let Some((m, _)) = s.message.take() {
        writeln!(out, "{m}")?;
    }
    Ok(())
}

fn answer(
    s: &mut State,
    driver: &mut dyn Driver,
    out: &mut dyn Write,
    key: &str,
    value: &str,
) -> anyhow::Result<()> {
    let found = s.lab.steps.iter().enumerate().find_map(|(i, st)| {
        st.questions
            .iter()
            .position(|q| q.key == key)
            .map(|j| (i, j))
    });
    let Some((step, q)) = found else {
        let keys: Vec<&str> = s.lab.steps[s.step]
            .questions
            .iter()
            .map(|q| q.key.as_str())
            .collect();
        writeln!(
            out,
            "{key:?} is not a question of this lab; this step's are: {}",
            keys.join(", ")
        )?;
        return Ok(());
    };
    if value.is_empty() {
        writeln!(out, "usage: answer {key} VALUE")?;
        return Ok(());
    }
    let was_done = s.step_done(step);
    s.answers[step][q].value = value.to_string();
    let effects = vec![super::event::Effect::Answer {
        step,
        answers: vec![(key.to_string(), value.to_string())],
    }];
    perform(s, driver, effects);
    s.message = None;
    if matches!(s.lab.steps[step].questions[q].input, Input::Pick { .. }) {
        s.chosen = s.picked();
    }
    if s.overlay == Overlay::Final {
        s.overlay = Overlay::None;
    }
    let live = live_note(&s.lab.steps[step].questions[q]);
    match &s.answers[step][q].verdict {
        Verdict::Right => writeln!(out, "right: {key}{live}")?,
        Verdict::NotYet(m) => writeln!(out, "not yet: {key}: {m}")?,
        Verdict::Unanswered => writeln!(out, "not checked: {key}")?,
    }
    if s.step_done(step) && !was_done {
        writeln!(out, "Step {} done. What you found:", step + 1)?;
        write_md(out, &s.lab.steps[step].explain)?;
        if s.all_done() {
            finish(out, s)?;
        } else {
            writeln!(out, "`next` goes to the next step.")?;
        }
    }
    Ok(())
}

/// Read the answers file again (`kdiag answer` or an editor may have
/// changed it) and check every answer.
fn check(s: &mut State, driver: &mut dyn Driver, out: &mut dyn Write) -> anyhow::Result<()> {
    let before: Vec<bool> = (0..s.lab.steps.len()).map(|i| s.step_done(i)).collect();
    match driver.reload() {
        Ok(given) => {
            s.update(Msg::Reloaded(given));
        }
        Err(e) => {
            writeln!(out, "{e:#}")?;
            return Ok(());
        }
    }
    s.message = None;
    if s.overlay == Overlay::Final {
        s.overlay = Overlay::None;
    }
    for (q, a) in s.lab.steps[s.step].questions.iter().zip(&s.answers[s.step]) {
        match &a.verdict {
            Verdict::Right => writeln!(out, "right: {}{}", q.key, live_note(q))?,
            Verdict::NotYet(m) => writeln!(out, "not yet: {}: {m}", q.key)?,
            Verdict::Unanswered => writeln!(out, "open: {}", q.key)?,
        }
    }
    let mut newly = false;
    for (i, was) in before.into_iter().enumerate() {
        if !was && s.step_done(i) {
            newly = true;
            writeln!(out, "Step {} done. What you found:", i + 1)?;
            write_md(out, &s.lab.steps[i].explain)?;
        }
    }
    if newly && s.all_done() {
        return finish(out, s);
    }
    status_line(out, s)
}

/// What a right answer to a question checked only live means.
fn live_note(q: &super::state::Question) -> &'static str {
    if q.points > 0.0 {
        ""
    } else {
        " (checked against the running workload: your progress, not your grade)"
    }
}

fn status_line(out: &mut dyn Write, s: &State) -> anyhow::Result<()> {
    let (got, max) = s.score(None);
    writeln!(
        out,
        "score {got}/{max} points, {}/{} steps done",
        s.steps_done(),
        s.lab.steps.len()
    )?;
    Ok(())
}

fn status(out: &mut dyn Write, s: &State) -> anyhow::Result<()> {
    for (i, st) in s.lab.steps.iter().enumerate() {
        let (got, max) = s.score(Some(i));
        let answered = s.answers[i].iter().any(|a| !a.value.is_empty());
        let state = match (s.step_done(i), answered) {
            (true, _) => "done",
            (false, true) => "in progress",
            (false, false) => "not started",
        };
        let here = if i == s.step { " <- current" } else { "" };
        writeln!(
            out,
            "step {} {:<8} {got}/{max} points, {state}{here}",
            i + 1,
            st.id
        )?;
    }
    status_line(out, s)
}

fn finish(out: &mut dyn Write, s: &State) -> anyhow::Result<()> {
    writeln!(out, "\n== All steps done ==")?;
    write_md(out, &s.lab.fin)?;
    status_line(out, s)
}
