//! Running a lab: the interactive app (tui::lab) on a terminal, else one
//! command a line (`--plain`, or without a terminal), with the engine
//! (lab/engine.rs) as the app's `Driver`.

use std::io::{IsTerminal, Write};
use std::time::SystemTime;

use super::{Files, kdiag_path, lab_view};
use crate::course::{attest, policy};
use crate::error;
use crate::grade::{CheckResult, Evidence, Status};
use crate::lab;
use crate::lab::engine::{Engine, Resumed};
use crate::lab::lines::Lines;
use crate::lab::medium::{Launch, Medium};
use crate::lab::state::{self, LabDir, Progress};
use crate::tui::lab::app::{self, Driver};
use crate::tui::lab::event::{Given, Verdict};
use crate::tui::lab::plain;
use crate::tui::lab::state::State;
use crate::user_files;

pub(super) fn run_lab(
    id: &str,
    seed: Option<String>,
    plain: bool,
    log: Option<&std::fs::File>,
    files: &Files,
) -> anyhow::Result<u8> {
    let source = files.source();
    let root = state::root(files.dir.as_deref())?;
    let before = Progress::load(&LabDir::new(&root, id).progress());
    let seed = lab::seed::choose(seed.as_deref(), Some(&LabDir::new(&root, id)))?.token;
    let (engine, resumed) = Engine::start(&source, id, seed, &root, files.dir.clone())?;
    // Every step done in the last run of this variant: the lab reopens as
    // finished (its live checks, redone against the new workload's PID,
    // count as they did).
    let finished = resumed.as_ref().is_some_and(|r| r.previous_seed.is_none())
        && engine.lab.steps.iter().all(|s| before.done.contains(&s.id));
    let mut driver = LabDriver {
        engine,
        seen: None,
        server: policy::server()?,
    };
    let result = run_app(
        &mut driver,
        resumed.as_ref(),
        plain || log.is_some(),
        log,
        finished,
    );
    driver.engine.stop();
    let dir = driver.engine.dir.path.display().to_string();
    match result {
        Ok(state) => {
            let (got, max) = state.score(None);
            // The terminal may be gone (closed window): say it if we can.
            let mut stdout = std::io::stdout().lock();
            let mut out = plain::Transcript {
                out: &mut stdout,
                log,
            };
            let _ = writeln!(
                out,
                "Score {got}/{max} points, {}/{} steps done. The workload has stopped; \
                 your answers and progress stay in {dir}.",
                state.steps_done(),
                state.lab.steps.len()
            );
            if state.all_done() {
                let _ = writeln!(
                    out,
                    "Check everything: {}\nSubmit:           kdiag lab submit {}{}",
                    driver.engine.check_command(),
                    driver.engine.lab.id,
                    dir_flag(&driver.engine)
                );
                Ok(error::OK)
            } else {
                Ok(error::FAILURE)
            }
        }
        Err(e) => Err(e),
    }
}

/// The app on a terminal, else the plain line mode.
fn run_app(
    driver: &mut LabDriver,
    resumed: Option<&Resumed>,
    plain: bool,
    log: Option<&std::fs::File>,
    finished: bool,
) -> anyhow::Result<State> {
    let given = driver.reload()?;
    let e = &driver.engine;
    let interactive = !plain && std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let view = lab_view(
        &e.lab,
        &e.checks,
        &|n| e.record_commands(n),
        &e.dir.answers().display().to_string(),
        Launch::here(kdiag_path().as_deref()),
        if interactive {
            Medium::App
        } else {
            Medium::Plain
        },
    );
    let mut state = State::new(view, &given);
    if finished {
        state.reopen_finished(driver.engine.pid());
    }
    if interactive {
        if let Some(r) = resumed {
            let text = resumed_text(r, &driver.engine).trim().replace('\n', " ");
            state.message = Some((text, crate::tui::lab::state::Tone::Info));
        }
        let observed = crate::course::policy::observed_user()?;
        return app::run(state, driver, observed);
    }
    let mut stdout = std::io::stdout().lock();
    let mut out = plain::Transcript {
        out: &mut stdout,
        log,
    };
    if let Some(r) = resumed {
        write!(out, "{}", resumed_text(r, &driver.engine))?;
    }
    writeln!(
        out,
        "kdiag started the workload (your variant: seed {}).",
        driver.engine.seed
    )?;
    let prompt = std::io::stdin().is_terminal();
    let lines = Lines::catch()?;
    let mut next_line = || {
        let line = lines.next()?;
        // The transcript shows each command as typed after its prompt.
        if let (Some(mut f), Some(line)) = (log, &line) {
            let prompt = if prompt { "" } else { "lab> " };
            writeln!(f, "{prompt}{line}")?;
        }
        Ok(line)
    };
    let state =
        plain::run(state, driver, &mut next_line, &mut out, prompt).map_err(unreadable_terminal)?;
    match lines.interrupted(&driver.engine.dir.path) {
        Some(e) => Err(e),
        None => Ok(state),
    }
}

/// Standard input a terminal this process may not read (EIO, ENXIO):
/// sudo's `use_pty` with the output piped (`sudo kdiag lab ... | tee
/// log`) leaves kdiag in the background of a terminal of sudo's own.
fn unreadable_terminal(e: anyhow::Error) -> anyhow::Error {
    let code = e
        .downcast_ref::<std::io::Error>()
        .and_then(std::io::Error::raw_os_error);
    if !matches!(code, Some(libc::EIO | libc::ENXIO)) {
        return e;
    }
    error::usage(format!(
        "cannot read your commands: standard input is a terminal kdiag may not read ({e}); \
         sudo does this when kdiag's output goes to a pipe (| tee). For a transcript, leave \
         out | tee and let kdiag write it: sudo kdiag lab LAB --plain --log FILE. Or give the \
         commands from a file: sudo kdiag lab LAB --plain < commands.txt"
    ))
}

/// The engine, as the app's driver.
struct LabDriver {
    engine: Engine,
    /// The answers file's modification time when last read or written.
    seen: Option<SystemTime>,
    /// On a course server: where answers, checks and evidence are journaled.
    server: Option<attest::Server>,
}

impl LabDriver {
    fn modified(&self) -> Option<SystemTime> {
        std::fs::metadata(self.engine.dir.answers())
            .and_then(|m| m.modified())
            .ok()
    }
}

/// A check's result as the app shows it.
fn verdict(r: &CheckResult) -> Verdict {
    match r.status {
        Status::Passed => Verdict::Right,
        Status::Failed | Status::Error => Verdict::NotYet(r.message.clone()),
        Status::NotGraded => Verdict::Unanswered,
    }
}

impl Driver for LabDriver {
    fn answer(
        &mut self,
        step: usize,
        given: &[(String, String)],
    ) -> anyhow::Result<Vec<(String, Verdict)>> {
        for (key, value) in given {
            let artifact = self
                .engine
                .checks
                .checks
                .iter()
                .any(|c| &c.id == key && c.is_artifact());
            state::record(&self.engine.dir, key, value, artifact)?;
            if let Some(server) = &self.server {
                lab::attested::journal_answer(server, &self.engine.lab.id, key)?;
            }
        }
        self.seen = self.modified();
        let mut checked = self.engine.check(step)?;
        let answers = self.engine.answers()?;
        let checks = &self.engine.checks.checks;
        lab::attempts::count(
            self.server.as_ref(),
            &self.engine.dir,
            &self.engine.lab.id,
            &answers,
            &Evidence::Dir {
                base: self.engine.dir.path.clone(),
                confined: false,
            },
            &mut checked.results,
            &|id| checks.iter().any(|c| c.id == id && c.is_artifact()),
        )?;
        Ok(checked
            .results
            .iter()
            .map(|r| (r.id.clone(), verdict(r)))
            .collect())
    }

    fn save(&mut self, file: &str, contents: &str) -> anyhow::Result<String> {
        let path = self.engine.dir.path.join(file);
        user_files::write_private(&path, contents)?;
        if let Some(server) = &self.server {
            lab::attested::journal_evidence(
                server,
                &self.engine.lab.id,
                file,
                contents.as_bytes(),
            )?;
        }
        Ok(path.display().to_string())
    }

    fn reload(&mut self) -> anyhow::Result<Vec<Given>> {
        self.seen = self.modified();
        let answers = self.engine.answers()?;
        let mut out = Vec::new();
        for n in 0..self.engine.lab.steps.len() {
            for r in self.engine.check(n)?.results {
                let value = answers.get(&r.id).unwrap_or_default();
                let v = if value.is_empty() {
                    Verdict::Unanswered
                } else {
                    verdict(&r)
                };
                out.push((r.id, value, v));
            }
        }
        Ok(out)
    }

    fn changed(&mut self) -> anyhow::Result<Option<Vec<Given>>> {
        if self.modified() == self.seen {
            return Ok(None);
        }
        self.reload().map(Some)
    }

    fn workload_stopped(&mut self) -> Option<String> {
        self.engine.workload_stopped()
    }
}

fn resumed_text(r: &Resumed, engine: &Engine) -> String {
    let mut out = format!(
        "Resuming: your answers are kept ({} graded checks pass already).\n",
        r.passing
    );
    if let Some(seed) = &r.previous_seed {
        out.push_str(&format!(
            "Your last run used seed {seed}; this one uses {}: your answers are checked against this variant.\n",
            engine.seed
        ));
    }
    if !r.redo.is_empty() {
        let was = r
            .previous_pid
            .map(|p| format!(" (it was PID {p})"))
            .unwrap_or_default();
        out.push_str(&format!(
            "The workload restarted with a new PID{was}: the checks made against the running \
             workload are redone: {}.\n",
            r.redo.join(", ")
        ));
    }
    out
}

fn dir_flag(engine: &Engine) -> String {
    let cmd = engine.check_command();
    match cmd.find(" --dir ") {
        Some(i) => cmd[i..].to_string(),
        None => String::new(),
    }
}
