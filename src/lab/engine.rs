//! One run of a lab, without any UI: it starts the workload for the
//! learner's seed, knows which step they are at, checks a step's answers
//! (graded checks against the seed's truth, live checks against the
//! running workload), and keeps the lab's progress notes. The line-based
//! front end and the TUI (commands/lab/session.rs) drive it the same way.
//!
//! Resuming keeps every answer: a step is done when its checks pass now,
//! so answers accepted before still pass (same seed, same truth) and only
//! live checks, made against the previous run's workload, need redoing.

use std::path::{Path, PathBuf};

use super::medium::for_variant;
use super::state::{LabDir, Progress};
use super::workload::Workload;
use super::{Lab, LabSource};
use crate::course::Token;
use crate::grade::answers::Answers;
use crate::grade::{self, CheckFile, CheckResult, Evidence, Facts, Status};

pub struct Engine {
    pub lab: Lab,
    pub checks: CheckFile,
    pub seed: Token,
    pub dir: LabDir,
    /// The `--dir` the learner gave, repeated in the commands the lab prints.
    dir_flag: Option<PathBuf>,
    /// The seed's truth plus the live run's facts.
    facts: Facts,
    workload: Workload,
    progress: Progress,
}

/// What a resumed lab tells the learner.
#[derive(Debug, Clone, PartialEq)]
pub struct Resumed {
    /// The workload's PID in the previous run.
    pub previous_pid: Option<u32>,
    /// The seed of the previous run, when it was another one.
    pub previous_seed: Option<String>,
    /// Graded checks that pass with the answers kept.
    pub passing: usize,
    /// Live checks of steps done before: they must be redone against the
    /// new run.
    pub redo: Vec<String>,
}

/// The outcome of checking one step.
#[derive(Debug, Clone)]
pub struct StepCheck {
    pub results: Vec<CheckResult>,
    /// Every check of the step passed: the step is done.
    pub done: bool,
}

impl Engine {
    /// Start lab `id` for `seed`, with the learner's files in `root/id`;
    /// `dir_flag` is the `--dir` they gave, if any. Returns what resuming
    /// changed, when there was a previous run.
    pub fn start(
        source: &LabSource,
        id: &str,
        seed: Token,
        root: &Path,
        dir_flag: Option<PathBuf>,
    ) -> anyhow::Result<(Engine, Option<Resumed>)> {
        let (mut lab, checks) = super::load(source, id)?;
        let truth = super::facts(&lab, &seed)?;
        // Steps that have the learner run a workload themselves show the
        // command with their seed; what depends on the variant is said for
        // theirs.
        for step in &mut lab.steps {
            step.text = for_variant(&step.text, &truth).replace("{seed}", seed.as_str());
            step.explain = for_variant(&step.explain, &truth);
        }
        let dir = LabDir::new(root, &lab.id);
        dir.create()?;
        let before = Progress::load(&dir.progress());
        let workload = Workload::start(
            &lab.workload,
            &lab.workload_args,
            seed.as_str(),
            Some(&dir.log()),
            read_iops(&truth),
        )?;
        let facts = truth.with_live(workload.pid());
        let progress = Progress {
            seed: seed.to_string(),
            pid: Some(workload.pid()),
            done: before.done.clone(),
        };
        progress.save(&dir.progress())?;
        let engine = Engine {
            lab,
            checks,
            seed,
            dir,
            dir_flag,
            facts,
            workload,
            progress,
        };
        let resumed = before.pid.is_some().then(|| engine.resumed(&before));
        Ok((engine, resumed))
    }

    fn resumed(&self, before: &Progress) -> Resumed {
        let answers = self.answers().unwrap_or_default();
        let results = self.evaluate(&answers, None);
        let passing = results
            .iter()
            .filter(|r| r.graded && r.status == Status::Passed)
            .count();
        let redo = self
            .checks
            .checks
            .iter()
            .filter(|c| c.live() && before.done.contains(&c.step))
            .map(|c| c.id.clone())
            .collect();
        Resumed {
            previous_pid: before.pid,
            previous_seed: (!before.seed.is_empty() && before.seed != self.seed.as_str())
                .then(|| before.seed.clone()),
            passing,
            redo,
        }
    }

    /// The workload's PID in this run.
    pub fn pid(&self) -> u32 {
        self.workload.pid()
    }

    /// The learner's answers; the error says where the file is wrong.
    pub fn answers(&self) -> anyhow::Result<Answers> {
        Answers::load(&self.dir.answers())
    }

    fn evaluate(&self, answers: &Answers, step: Option<&str>) -> Vec<CheckResult> {
        let evidence = Evidence::Dir {
            base: self.dir.path.clone(),
            confined: false,
        };
        grade::evaluate(&self.checks.checks, answers, &self.facts, &evidence, step)
    }

    /// Whether every check of step `n` passes now.
    pub fn step_passes(&self, n: usize) -> bool {
        let answers = self.answers().unwrap_or_default();
        self.evaluate(&answers, Some(&self.lab.steps[n].id))
            .iter()
            .all(|r| r.status == Status::Passed)
    }

    /// Check step `n`'s answers; a step whose checks all pass is done.
    pub fn check(&mut self, n: usize) -> anyhow::Result<StepCheck> {
        let answers = self.answers()?;
        let step = self.lab.steps[n].id.clone();
        let results = self.evaluate(&answers, Some(&step));
        let done = results.iter().all(|r| r.status == Status::Passed);
        if done {
            self.mark_done(n)?;
        }
        Ok(StepCheck { results, done })
    }

    /// Record step `n` as done in the lab's notes.
    pub fn mark_done(&mut self, n: usize) -> anyhow::Result<()> {
        let step = &self.lab.steps[n].id;
        if !self.progress.done.contains(step) {
            self.progress.done.push(step.clone());
            self.progress.save(&self.dir.progress())?;
        }
        Ok(())
    }

    /// Hints for the checks of step `n` that do not pass: (check id, hint).
    pub fn hints(&self, n: usize) -> Vec<(String, String)> {
        let answers = self.answers().unwrap_or_default();
        let step = &self.lab.steps[n].id;
        let results = self.evaluate(&answers, Some(step));
        self.checks
            .checks
            .iter()
            .filter(|c| &c.step == step)
            .filter(|c| {
                results
                    .iter()
                    .any(|r| r.id == c.id && r.status != Status::Passed)
            })
            .map(|c| (c.id.clone(), c.hint.clone()))
            .collect()
    }

    /// The exact commands that record step `n`'s answers, from any
    /// directory.
    pub fn record_commands(&self, n: usize) -> Vec<String> {
        let step = &self.lab.steps[n].id;
        let dir = match &self.dir_flag {
            Some(d) => format!(" --dir {}", shell_word(&d.display().to_string())),
            None => String::new(),
        };
        self.checks
            .checks
            .iter()
            .filter(|c| &c.step == step)
            .map(|c| {
                format!(
                    "kdiag answer {} {} {}{dir}",
                    self.lab.id,
                    c.id,
                    c.placeholder()
                )
            })
            .collect()
    }

    /// The command that checks every answer, as the learner would type it.
    pub fn check_command(&self) -> String {
        let dir = match &self.dir_flag {
            Some(d) => format!(" --dir {}", shell_word(&d.display().to_string())),
            None => String::new(),
        };
        format!("kdiag check {} --seed {}{dir}", self.lab.id, self.seed)
    }

    /// Why the workload stopped on its own, if it did: its exit status and
    /// its own last words (e.g. its scratch directory is in use).
    pub fn workload_stopped(&mut self) -> Option<String> {
        let code = self.workload.exited()?;
        let log = std::fs::read_to_string(self.dir.log()).unwrap_or_default();
        let why = log.lines().last().unwrap_or("no output").to_string();
        Some(format!("{code}: {why}"))
    }

    /// Stop the workload (SIGTERM, then SIGKILL; reaped).
    pub fn stop(&mut self) {
        self.workload.stop();
    }
}

/// The read-IOPS limit a workload's truth asks for (bio's slowed disk).
pub fn read_iops(facts: &Facts) -> Option<u64> {
    facts.get("expect.throttle_read_iops")?.parse().ok()
}

/// `s` quoted for a POSIX shell when it needs to be.
pub fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words() {
        assert_eq!(shell_word("/tmp/x"), "/tmp/x");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
    }
}
