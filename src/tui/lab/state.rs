//! The lab app's state and its one `update`: a message in, the state
//! changed, effects out (answers to save and check). No I/O, so the tests
//! drive it with keys and recorded data.

use crate::model::lab::{Input, Panel, PickColumn};

use super::event::{Effect, Given, Key, Msg, Verdict};
use super::panels::{Chosen, Instrument, Panels, Scroll, instrument};

/// A lab as the app shows it; the front end fills it in from the lab's
/// definition and checks.
#[derive(Debug, Clone, Default)]
pub struct LabView {
    pub id: String,
    pub title: String,
    pub welcome: String,
    pub fin: String,
    pub steps: Vec<StepView>,
    /// Where the answers are saved, for the help screen.
    pub answers_file: String,
}

#[derive(Debug, Clone, Default)]
pub struct StepView {
    pub id: String,
    pub title: String,
    /// Markdown.
    pub text: String,
    /// The write-up shown once every answer of the step is right.
    pub explain: String,
    pub panels: Vec<Panel>,
    pub questions: Vec<Question>,
}

#[derive(Debug, Clone)]
pub struct Question {
    /// The answers key (the check's id).
    pub key: String,
    pub label: String,
    pub input: Input,
    /// Points toward the grade; 0 for a question checked only live.
    pub points: f64,
    pub hint: String,
    /// The shell command that records it from another terminal.
    pub shell: String,
}

/// A question's answer so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub value: String,
    pub verdict: Verdict,
    pub hint_shown: bool,
    /// For choice questions: the choice on screen, none until the learner
    /// picks one (so Enter alone never answers).
    pub choice: Option<usize>,
}

impl Default for Answer {
    fn default() -> Self {
        Answer {
            value: String::new(),
            verdict: Verdict::Unanswered,
            hint_shown: false,
            choice: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlay {
    None,
    Welcome,
    Help,
    Final,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Info,
    Good,
    Bad,
}

#[derive(Debug, Clone)]
pub struct State {
    pub lab: LabView,
    /// Per step, per question.
    pub answers: Vec<Vec<Answer>>,
    /// The step on screen.
    pub step: usize,
    /// The question in focus.
    pub question: usize,
    /// Text being typed into the question in focus.
    pub editing: Option<String>,
    /// Which of the step's panels is on screen.
    pub panel: usize,
    pub overlay: Overlay,
    pub message: Option<(String, Tone)>,
    pub panels: Panels,
    pub chosen: Option<Chosen>,
    /// Lines of the step's text scrolled away.
    pub scroll: Scroll,
    /// Answers sent for checking, whose verdicts the next `Checked` brings.
    pending: Vec<String>,
    pub quit: bool,
}

impl State {
    /// The app for `lab`, with the answers already given: (key, value,
    /// verdict) as the front end checked them at start.
    pub fn new(lab: LabView, given: &[Given]) -> State {
        let answers = lab
            .steps
            .iter()
            .map(|s| {
                s.questions
                    .iter()
                    .map(|q| {
                        let mut a = Answer::default();
                        if let Some((_, v, verdict)) = given.iter().find(|g| g.0 == q.key) {
                            a.value.clone_from(v);
                            a.verdict = verdict.clone();
                            if let Input::Choice { choices } = &q.input {
                                a.choice = choices.iter().position(|c| c == v);
                            }
                        }
                        a
                    })
                    .collect()
            })
            .collect();
        let mut s = State {
            lab,
            answers,
            step: 0,
            question: 0,
            editing: None,
            panel: 0,
            overlay: Overlay::None,
            message: None,
            panels: Panels::default(),
            chosen: None,
            scroll: Scroll::default(),
            pending: Vec::new(),
            quit: false,
        };
        s.chosen = s.picked();
        let fresh = s.answers.iter().flatten().all(|a| a.value.is_empty());
        if fresh && !s.lab.welcome.trim().is_empty() {
            s.overlay = Overlay::Welcome;
        }
        // Resume at the first step not done.
        s.go_to(
            (0..s.lab.steps.len())
                .find(|&i| !s.step_done(i))
                .unwrap_or(0),
        );
        s
    }

    /// A lab whose every step was done in the last run of this variant:
    /// its live questions (redone against the new workload, worth no
    /// points) count as right again, and the final screen shows. The
    /// process picked is the new workload's, `pid`: the old one is gone.
    pub fn reopen_finished(&mut self, pid: u32) {
        for (step, answers) in self.lab.steps.iter().zip(&mut self.answers) {
            for (q, a) in step.questions.iter().zip(answers) {
                if q.points == 0.0 && !a.value.is_empty() {
                    if let Input::Pick {
                        column: PickColumn::Pid,
                    } = q.input
                    {
                        a.value = pid.to_string();
                    }
                    a.verdict = Verdict::Right;
                }
            }
        }
        self.chosen = self.picked();
        if self.all_done() {
            self.overlay = Overlay::Final;
            self.message = Some(("This lab is finished: all steps done.".into(), Tone::Good));
        }
    }

    /// The text of step `i`, `<PID>` in it the PID of the process picked.
    pub fn step_text(&self, i: usize) -> String {
        let text = &self.lab.steps[i].text;
        match &self.chosen {
            Some(c) => text.replace("<PID>", &c.pid.to_string()),
            None => text.clone(),
        }
    }

    /// The process the learner picked (from their answers), while that
    /// answer holds: after a resume the workload has a new PID, and the old
    /// one, dead, is no process to show or name in the step's text.
    pub fn picked(&self) -> Option<Chosen> {
        let mut pid = None;
        let mut comm = String::new();
        for (step, answers) in self.lab.steps.iter().zip(&self.answers) {
            for (q, a) in step.questions.iter().zip(answers) {
                match q.input {
                    Input::Pick {
                        column: PickColumn::Pid,
                    } if a.verdict == Verdict::Right => pid = a.value.parse().ok(),
                    Input::Pick {
                        column: PickColumn::Comm,
                    } => comm.clone_from(&a.value),
                    _ => {}
                }
            }
        }
        pid.map(|pid| Chosen { pid, comm })
    }

    pub fn step_done(&self, i: usize) -> bool {
        self.answers[i].iter().all(|a| a.verdict == Verdict::Right)
    }

    pub fn steps_done(&self) -> usize {
        (0..self.lab.steps.len())
            .filter(|&i| self.step_done(i))
            .count()
    }

    pub fn all_done(&self) -> bool {
        self.steps_done() == self.lab.steps.len()
    }

    /// Points of step `i` (or of every step): (scored, maximum).
    pub fn score(&self, step: Option<usize>) -> (f64, f64) {
        let mut got = 0.0;
        let mut max = 0.0;
        for (i, s) in self.lab.steps.iter().enumerate() {
            if step.is_some_and(|n| n != i) {
                continue;
            }
            for (q, a) in s.questions.iter().zip(&self.answers[i]) {
                max += q.points;
                if a.verdict == Verdict::Right {
                    got += q.points;
                }
            }
        }
        (got, max)
    }

    /// The panel on screen, if the step has any.
    pub fn panel(&self) -> Option<Panel> {
        self.lab
            .steps
            .get(self.step)?
            .panels
            .get(self.panel)
            .copied()
    }

    /// What the collectors should watch: the tracing instrument of the
    /// panel on screen (none behind an overlay that hides it) and the
    /// process chosen.
    pub fn wanted(&self) -> (Option<Instrument>, Option<i32>) {
        let pid = self.chosen.as_ref().map(|c| c.pid);
        let hidden = matches!(self.overlay, Overlay::Final | Overlay::Welcome);
        let inst = self.panel().and_then(instrument).filter(|_| !hidden);
        // Without a process there is nothing to trace for a process panel.
        match (inst, pid) {
            (Some(Instrument::Iosnoop), _) => (inst, pid),
            (Some(_), None) => (None, None),
            _ => (inst, pid),
        }
    }

    fn go_to(&mut self, step: usize) {
        self.step = step.min(self.lab.steps.len().saturating_sub(1));
        self.panel = 0;
        self.panels.text_scroll.home();
        self.scroll.home();
        self.editing = None;
        self.question = self
            .answers
            .get(self.step)
            .and_then(|a| a.iter().position(|a| a.verdict != Verdict::Right))
            .unwrap_or(0);
    }

    fn questions(&self) -> &[Question] {
        &self.lab.steps[self.step].questions
    }

    fn say(&mut self, text: impl Into<String>, tone: Tone) {
        self.message = Some((text.into(), tone));
    }

    /// Apply one message.
    pub fn update(&mut self, msg: Msg) -> Vec<Effect> {
        match msg {
            Msg::Key(k) => return self.key(k),
            Msg::Resize => {}
            Msg::Data(d) => {
                let chosen = self.chosen.clone();
                self.panels.absorb(d, chosen.as_ref());
            }
            Msg::Checked { step, verdicts } => self.checked(step, verdicts),
            Msg::Saved { key, path } => {
                if let Some(i) = self.questions().iter().position(|q| q.key == key) {
                    self.answers[self.step][i].value = path;
                }
            }
            Msg::Reloaded(given) => self.reloaded(given),
            Msg::Problem(p) => self.say(p, Tone::Bad),
            Msg::Stop => self.quit = true,
        }
        Vec::new()
    }

    /// Take the answers file as it is now.
    fn reloaded(&mut self, given: Vec<Given>) {
        let done_before = self.steps_done();
        let mut changed = Vec::new();
        for (i, step) in self.lab.steps.iter().enumerate() {
            for (j, q) in step.questions.iter().enumerate() {
                let (value, verdict) = match given.iter().find(|g| g.0 == q.key) {
                    Some((_, v, verdict)) => (v.clone(), verdict.clone()),
                    None => (String::new(), Verdict::Unanswered),
                };
                let a = &mut self.answers[i][j];
                if a.value != value || a.verdict != verdict {
                    changed.push(q.key.clone());
                    a.value = value;
                    a.verdict = verdict;
                }
            }
        }
        if let Some(p) = self.picked() {
            self.chosen = Some(p);
        }
        if self.all_done() && done_before < self.lab.steps.len() {
            self.say("Every step is done.", Tone::Good);
            self.overlay = Overlay::Final;
        } else if !changed.is_empty() {
            self.say(
                format!(
                    "Answers file changed: {} checked again.",
                    changed.join(", ")
                ),
                Tone::Info,
            );
        }
    }

    fn checked(&mut self, step: usize, verdicts: Vec<(String, Verdict)>) {
        let Some(questions) = self.lab.steps.get(step).map(|s| s.questions.clone()) else {
            return;
        };
        let was_done = self.step_done(step);
        for (key, verdict) in verdicts {
            let Some(i) = questions.iter().position(|q| q.key == key) else {
                continue;
            };
            let a = &mut self.answers[step][i];
            // An unanswered question stays unanswered: its "no answer yet"
            // is no news.
            if !a.value.is_empty() || verdict == Verdict::Right {
                a.verdict = verdict;
            }
        }
        let pending = std::mem::take(&mut self.pending);
        let wrong: Vec<String> = pending
            .iter()
            .filter_map(|k| {
                let i = questions.iter().position(|q| &q.key == k)?;
                match &self.answers[step][i].verdict {
                    Verdict::NotYet(m) => Some(m.clone()),
                    _ => None,
                }
            })
            .collect();
        if self.step_done(step) && !was_done {
            if self.all_done() {
                self.say("Every step is done.", Tone::Good);
                self.overlay = Overlay::Final;
            } else {
                self.say(
                    "Right: step done. Its write-up is above the step's text; n goes to the next step.",
                    Tone::Good,
                );
            }
        } else if !wrong.is_empty() {
            self.say(format!("Not yet: {}", wrong.join(" ")), Tone::Bad);
        } else if !pending.is_empty() {
            self.say("Right.", Tone::Good);
        }
        // Move on to the next question still open.
        if step == self.step && !pending.is_empty() && wrong.is_empty() {
            let n = self.answers[step].len();
            if let Some(next) = (1..=n)
                .map(|d| (self.question + d) % n)
                .find(|&i| self.answers[step][i].verdict != Verdict::Right)
            {
                self.question = next;
            }
        }
    }

    fn key(&mut self, key: Key) -> Vec<Effect> {
        if key == Key::CtrlC {
            self.quit = true;
            return Vec::new();
        }
        match self.overlay {
            Overlay::None => {}
            Overlay::Final if key == Key::Char('q') => {
                self.quit = true;
                return Vec::new();
            }
            _ => {
                self.overlay = Overlay::None;
                return Vec::new();
            }
        }
        if let Some(text) = &mut self.editing {
            match key {
                Key::Char(c) => text.push(c),
                Key::Backspace => {
                    text.pop();
                }
                Key::CtrlU => text.clear(),
                Key::Esc => self.editing = None,
                Key::Enter => {
                    let value = text.trim().to_string();
                    self.editing = None;
                    let q = self.questions()[self.question].clone();
                    if !value.is_empty() {
                        return self.answer(vec![(q.key, value)]);
                    }
                    // Enter alone on evidence: the panel's data.
                    if q.input == Input::Evidence {
                        return self.evidence(&q.key);
                    }
                }
                _ => {}
            }
            return Vec::new();
        }
        let nq = self.questions().len();
        match key {
            Key::Char('q') => self.quit = true,
            Key::Char('?') => self.overlay = Overlay::Help,
            Key::Char('h') => self.hint(),
            Key::Char('n') => {
                if self.step + 1 < self.lab.steps.len() {
                    self.go_to(self.step + 1);
                    self.message = None;
                } else if self.all_done() {
                    self.overlay = Overlay::Final;
                } else {
                    self.say("This is the last step.", Tone::Info);
                }
            }
            Key::Char('p') => {
                self.go_to(self.step.saturating_sub(1));
                self.message = None;
            }
            Key::Char('v') => {
                let n = self.lab.steps[self.step].panels.len().max(1);
                self.panel = (self.panel + 1) % n;
                self.panels.text_scroll.home();
            }
            Key::Tab if nq > 0 => self.question = (self.question + 1) % nq,
            Key::BackTab if nq > 0 => self.question = (self.question + nq - 1) % nq,
            Key::PageDown => self.scroll.page(1),
            Key::PageUp => self.scroll.page(-1),
            Key::Left | Key::Right if nq > 0 => {
                let q = &self.lab.steps[self.step].questions[self.question];
                if let Input::Choice { choices } = &q.input {
                    let n = choices.len().max(1);
                    let a = &mut self.answers[self.step][self.question];
                    // A right answer stays on screen with its ✓.
                    if a.verdict == Verdict::Right {
                        return Vec::new();
                    }
                    a.choice = Some(match (a.choice, key == Key::Right) {
                        (None, true) => 0,
                        (None, false) => n - 1,
                        (Some(c), true) => (c + 1) % n,
                        (Some(c), false) => (c + n - 1) % n,
                    });
                }
            }
            Key::Enter if nq > 0 => return self.enter(),
            Key::Esc => self.message = None,
            other => {
                if let Some(p) = self.panel() {
                    self.panels.key(p, other);
                }
            }
        }
        Vec::new()
    }

    /// Enter on the question in focus: answer it the way its input says.
    fn enter(&mut self) -> Vec<Effect> {
        let q = self.questions()[self.question].clone();
        match &q.input {
            Input::Text | Input::Number { .. } => {
                let a = &self.answers[self.step][self.question];
                self.editing = Some(a.value.clone());
                Vec::new()
            }
            Input::Choice { choices } => {
                let a = &self.answers[self.step][self.question];
                match a.choice.and_then(|i| choices.get(i)) {
                    Some(c) => self.answer(vec![(q.key.clone(), c.clone())]),
                    None => {
                        self.say("Choose with ← → first, then Enter.", Tone::Info);
                        Vec::new()
                    }
                }
            }
            Input::Pick { .. } => self.pick(),
            // A path typed, or Enter alone for the panel's data: never a
            // save at once, after which a typed path would run as keys.
            Input::Evidence => {
                self.editing = Some(String::new());
                Vec::new()
            }
        }
    }

    /// Answer every pick question of the step with the highlighted process.
    fn pick(&mut self) -> Vec<Effect> {
        let Some(row) = self.panels.processes.selected_row() else {
            self.say(
                "The process table is empty so far: wait a second.",
                Tone::Info,
            );
            return Vec::new();
        };
        self.chosen = Some(Chosen {
            pid: row.pid,
            comm: row.comm.clone(),
        });
        let answers = self
            .questions()
            .iter()
            .filter_map(|q| match q.input {
                Input::Pick {
                    column: PickColumn::Pid,
                } => Some((q.key.clone(), row.pid.to_string())),
                Input::Pick {
                    column: PickColumn::Comm,
                } => Some((q.key.clone(), row.comm.clone())),
                _ => None,
            })
            .collect();
        self.answer(answers)
    }

    /// Whether the panel on screen can be saved as evidence.
    pub fn panel_saves(&self) -> bool {
        matches!(
            self.panel(),
            Some(Panel::Profile | Panel::Offcpu | Panel::Iosnoop | Panel::IoPattern)
        )
    }

    /// Save the panel on screen as evidence for question `key`.
    fn evidence(&mut self, key: &str) -> Vec<Effect> {
        let pid = self.chosen.as_ref().map(|c| c.pid);
        let (file, contents) = match (self.panel(), pid) {
            (Some(Panel::Profile), Some(pid))
                if !self.panels.profile.merged(pid).stacks.is_empty() =>
            {
                ("profile.folded", self.panels.profile.folded(pid))
            }
            (Some(Panel::Offcpu), Some(pid)) if self.panels.offcpu.of(pid).is_some() => {
                ("offcpu.folded", self.panels.offcpu.folded(pid))
            }
            (Some(Panel::Iosnoop | Panel::IoPattern), Some(pid))
                if !self.panels.io.of(pid).is_empty() =>
            {
                let doc = serde_json::json!({ "requests": self.panels.io.of(pid) });
                (
                    "iosnoop.json",
                    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n",
                )
            }
            (Some(Panel::Profile | Panel::Offcpu | Panel::Iosnoop | Panel::IoPattern), _) => {
                self.say(
                    "Nothing to save yet: wait until the panel has data, then Enter again.",
                    Tone::Info,
                );
                return Vec::new();
            }
            _ => {
                // No panel to save: the path of a file made in a shell
                // (a `kdiag time -o` file) is the answer.
                self.say(
                    "This panel's data is no evidence: type the path of the file \
                     the step's command wrote.",
                    Tone::Info,
                );
                self.editing = Some(String::new());
                return Vec::new();
            }
        };
        self.pending = vec![key.to_string()];
        vec![Effect::Evidence {
            step: self.step,
            key: key.to_string(),
            file: file.to_string(),
            contents,
        }]
    }

    fn answer(&mut self, answers: Vec<(String, String)>) -> Vec<Effect> {
        if answers.is_empty() {
            return Vec::new();
        }
        for (key, value) in &answers {
            if let Some(i) = self.questions().iter().position(|q| &q.key == key) {
                self.answers[self.step][i].value.clone_from(value);
            }
        }
        self.pending = answers.iter().map(|(k, _)| k.clone()).collect();
        vec![Effect::Answer {
            step: self.step,
            answers,
        }]
    }

    /// Reveal one more hint: the question in focus first, then the next
    /// question not right yet.
    fn hint(&mut self) {
        let n = self.questions().len();
        let next = (0..n).map(|d| (self.question + d) % n).find(|&i| {
            let a = &self.answers[self.step][i];
            a.verdict != Verdict::Right && !a.hint_shown
        });
        match next {
            Some(i) => {
                self.answers[self.step][i].hint_shown = true;
                self.question = i;
                let hint = self.questions()[i].hint.clone();
                self.say(format!("Hint: {hint}"), Tone::Info);
            }
            None => self.say("No more hints for this step.", Tone::Info),
        }
    }
}
