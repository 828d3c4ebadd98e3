//! `kdiag lab`: list the guided labs, run one, reset one, submit it, or
//! (instructors) print a learner's reference solution. A lab runs as the
//! interactive app (tui::lab) on a terminal, or one command a line with
//! `--plain` or without a terminal; the engine (lab/engine.rs) does the
//! work, and this file hands it to the app as its `Driver`.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::SystemTime;

use anyhow::Context;

use super::args::Files;
use crate::course::{Course, attest, policy};
use crate::error;
use crate::grade::answers;
use crate::grade::{self, CheckResult, Evidence, Status};
use crate::lab::engine::{Engine, Resumed, shell_word};
use crate::lab::medium::{Launch, Medium, line_for, runnable, text_for};
use crate::lab::state::{self, LabDir, Progress};
use crate::lab::{self, solution, submission};
use crate::model::lab::{Input, Panel};
use crate::render::table::{Align, Table};
use crate::sys::process::interrupt::Interrupt;
use crate::sys::process::{privilege, user_files};
use crate::tui::lab::app::{self, Driver};
use crate::tui::lab::event::{Given, Verdict};
use crate::tui::lab::plain;
use crate::tui::lab::state::{LabView, Question, State, StepView};

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Sub>,
    /// The lab to run (e.g. 0-demo); `kdiag lab list` lists them
    #[arg(required_unless_present = "list")]
    pub lab: Option<String>,
    /// List the labs, as `kdiag lab list` does
    #[arg(long, conflicts_with_all = ["lab", "seed", "plain", "log"])]
    pub list: bool,
    /// Your seed token (from your course; default: the lab's last seed,
    /// else $KDIAG_SEED, else one derived from your user name). Refused on
    /// a course server, where your variant is your account's
    #[arg(long, value_name = "TOKEN")]
    pub seed: Option<String>,
    /// One command a line on stdin, each reply on stdout, instead of the
    /// interactive app (also when stdin or stdout is not a terminal)
    #[arg(long)]
    pub plain: bool,
    /// Write a transcript of the lab (what it prints and what you type) to
    /// FILE, as you: the way to keep a log without `| tee` (implies --plain)
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    #[command(flatten)]
    pub files: Files,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// List the labs with your status and score in each
    List {
        #[command(flatten)]
        files: Files,
    },
    /// Clear a lab's answers and progress (after a confirmation)
    Reset {
        /// The lab (e.g. 0-demo)
        lab: String,
        /// Do not ask for confirmation
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        files: Files,
    },
    /// Pack your answers and the files they name into one submission
    Submit {
        /// The lab (e.g. 0-demo)
        lab: String,
        /// The archive to write (default kdiag-LAB-LEARNER.tar), or with --folder a new folder
        #[arg(long, value_name = "PATH")]
        out: Option<PathBuf>,
        /// Write a folder instead of a tar archive
        #[arg(long)]
        folder: bool,
        /// Your learner id, as your course knows you (default: your user name)
        #[arg(long, value_name = "ID")]
        learner: Option<String>,
        #[command(flatten)]
        files: Files,
    },
    /// Print a learner's reference answers (instructors: needs the course file)
    Solution {
        /// The lab (e.g. 0-demo)
        lab: String,
        /// The course file (kdiag course init)
        #[arg(long, value_name = "FILE")]
        course: PathBuf,
        /// The learner's id
        #[arg(long, value_name = "ID")]
        learner: String,
        /// Write a complete reference submission into this new folder,
        /// running the workload and the lab's instruments (needs root)
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        #[command(flatten)]
        files: Files,
    },
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    match args.command {
        Some(Sub::List { files }) => list(&files),
        Some(Sub::Reset { lab, yes, files }) => reset(&lab, yes, &files),
        Some(Sub::Submit {
            lab,
            out,
            folder,
            learner,
            files,
        }) => submit(&lab, out, folder, learner, &files),
        Some(Sub::Solution {
            lab,
            course,
            learner,
            out,
            files,
        }) => reference(&lab, &course, &learner, out, &files),
        None if args.list => list(&args.files),
        None => {
            let lab = args.lab.expect("clap requires it");
            if lab == "list" {
                return list(&args.files);
            }
            // The transcript first: a path refused stops the lab before
            // its workload starts.
            let log = match &args.log {
                Some(p) => Some(
                    user_files::create(p)
                        .with_context(|| format!("cannot write the transcript {}", p.display()))?,
                ),
                None => None,
            };
            run_lab(&lab, args.seed, args.plain, log.as_ref(), &args.files)
        }
    }
}

fn list(files: &Files) -> anyhow::Result<u8> {
    let source = files.source();
    let root = state::root(files.dir.as_deref())?;
    let dir = match &files.dir {
        Some(d) => format!(" --dir {}", shell_word(&d.display().to_string())),
        None => String::new(),
    };
    let exe = kdiag_path().unwrap_or_else(|| "kdiag".into());
    // Through a course server's service, no sudo: kdiag asks the service.
    let start = match privilege::served() {
        true => exe,
        false => format!("sudo {exe}"),
    };
    let mut t = Table::new([
        ("LAB", Align::Left),
        ("TITLE", Align::Left),
        ("WORKLOAD", Align::Left),
        ("STATUS", Align::Left),
        ("SCORE", Align::Right),
        ("START", Align::Left),
    ]);
    for id in source.ids()? {
        let (lab, checks) = lab::load(&source, &id)?;
        let ld = LabDir::new(&root, &lab.id);
        let answers = answers::Answers::load(&ld.answers()).unwrap_or_default();
        let seed = lab::seed::choose(None, Some(&ld))?.token;
        let facts = lab::facts(&lab, &seed)?;
        let evidence = Evidence::Dir {
            base: ld.path.clone(),
            confined: false,
        };
        let results = grade::evaluate(&checks.checks, &answers, &facts, &evidence, None);
        let (got, max) = grade::totals(&results);
        // From the score, not the app's progress notes: a lab whose
        // evidence was replaced since is no longer done.
        let status = if max > 0.0 && got >= max {
            "done"
        } else if !answers.keys().is_empty() {
            "in progress"
        } else {
            "not started"
        };
        t.push(vec![
            lab.id.clone(),
            lab.title.clone(),
            lab.workload.clone(),
            status.to_string(),
            format!("{got}/{max}"),
            format!("{start} lab {}{dir}", lab.id),
        ]);
    }
    t.write(&mut std::io::stdout().lock())?;
    Ok(error::OK)
}

/// The files of a lab's folder that a reset clears: the learner's
/// answers, the lab's notes, the workload's log and the evidence the app
/// saved. Anything else the learner put there stays.
const RESET_FILES: &[&str] = &[
    "answers.toml",
    "progress.toml",
    "workload.log",
    "profile.folded",
    "iosnoop.json",
];

fn reset(id: &str, yes: bool, files: &Files) -> anyhow::Result<u8> {
    let (lab, _) = lab::load(&files.source(), id)?;
    let dir = files.lab_dir(&lab.id)?;
    let present: Vec<PathBuf> = RESET_FILES
        .iter()
        .map(|f| dir.path.join(f))
        .filter(|p| p.symlink_metadata().is_ok())
        .collect();
    if present.is_empty() {
        println!(
            "Lab {} has no answers or progress in {}.",
            lab.id,
            dir.path.display()
        );
        return Ok(error::OK);
    }
    if !yes {
        if !std::io::stdin().is_terminal() {
            return Err(error::usage(format!(
                "kdiag lab reset {} asks before clearing your answers: answer on a terminal, or add --yes",
                lab.id
            )));
        }
        print!(
            "Clear your answers and progress of lab {} in {}? [y/N] ",
            lab.id,
            dir.path.display()
        );
        std::io::stdout().flush()?;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        if !matches!(line.trim(), "y" | "Y" | "yes") {
            println!("Nothing cleared.");
            return Ok(error::FAILURE);
        }
    }
    for p in &present {
        user_files::remove_file(p)?;
    }
    let names: Vec<String> = present
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    println!(
        "Cleared lab {} ({}). `kdiag lab {}` starts it afresh.",
        lab.id,
        names.join(", "),
        lab.id
    );
    Ok(error::OK)
}

fn run_lab(
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
        Launch {
            exe: kdiag_path().as_deref(),
            served: privilege::served(),
        },
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
    // Ctrl-C leaves the lab as `quit` does (its exit code says whether
    // every step is done); SIGTERM and SIGHUP interrupt it (128+N).
    let interrupt = Interrupt::catch()?;
    let lines = stdin_lines();
    let mut next_line = || loop {
        if interrupt.is_set() {
            return Ok(None);
        }
        match lines.recv_timeout(std::time::Duration::from_millis(100)) {
            Ok(Ok(line)) => {
                // The transcript shows each command as typed after its prompt.
                if let Some(mut f) = log {
                    let prompt = if prompt { "" } else { "lab> " };
                    writeln!(f, "{prompt}{line}")?;
                }
                return Ok(Some(line));
            }
            Ok(Err(e)) => return Err(e),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(None),
        }
    };
    let state =
        plain::run(state, driver, &mut next_line, &mut out, prompt).map_err(unreadable_terminal)?;
    match interrupt.signal() {
        // The error's context names the signal; the message says what stays.
        Some(sig) if sig != libc::SIGINT => Err(interrupt.explain(
            anyhow::anyhow!(
                "the lab stopped before its end; your answers and progress stay in {}",
                driver.engine.dir.path.display()
            ),
            true,
        )),
        _ => Ok(state),
    }
}

/// Standard input's lines, read in a thread of their own so that the
/// plain mode can stop waiting for one when a signal arrives.
fn stdin_lines() -> mpsc::Receiver<std::io::Result<String>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let failed = line.is_err();
            if tx.send(line).is_err() || failed {
                break;
            }
        }
    });
    rx
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

/// The lab as the app shows it: each check of a step is a question, asked
/// the way the step's `inputs` say (else as a number of bytes, a file
/// saved from the panel, or text, by the check's kind).
/// `shell(n)` are the commands that record step `n`'s answers from a
/// shell, started as `launch` says; the steps' texts are `medium`'s.
pub fn lab_view(
    lab: &lab::Lab,
    checks: &grade::CheckFile,
    shell: &dyn Fn(usize) -> Vec<String>,
    answers_file: &str,
    launch: Launch,
    medium: Medium,
) -> LabView {
    let run = |t: &str| runnable(t, launch);
    let steps = lab
        .steps
        .iter()
        .enumerate()
        .map(|(n, step)| {
            let shell: Vec<String> = shell(n).iter().map(|c| run(c)).collect();
            let questions = checks
                .checks
                .iter()
                .filter(|c| c.step == step.id)
                .enumerate()
                .map(|(i, c)| {
                    let evidence_panel = step.panels.iter().any(|p| {
                        matches!(
                            p,
                            Panel::Profile | Panel::Offcpu | Panel::Iosnoop | Panel::IoPattern
                        )
                    });
                    let input = match step.inputs.get(&c.id) {
                        Some(i) => i.clone(),
                        None if c.is_artifact() && evidence_panel => Input::Evidence,
                        None if c.form == grade::forms::Form::Bytes => Input::Number {
                            unit: Some("bytes".into()),
                        },
                        None => Input::Text,
                    };
                    Question {
                        key: c.id.clone(),
                        label: c.name.clone(),
                        input,
                        points: if c.live() { 0.0 } else { c.points },
                        hint: line_for(&c.hint, medium),
                        shell: shell.get(i).cloned().unwrap_or_default(),
                    }
                })
                .collect();
            StepView {
                id: step.id.clone(),
                title: step.title.clone(),
                text: run(&text_for(&step.text, medium)),
                explain: run(&text_for(&step.explain, medium)),
                panels: step.panels.clone(),
                questions,
            }
        })
        .collect();
    LabView {
        id: lab.id.clone(),
        title: lab.title.clone(),
        welcome: lab.welcome.clone(),
        fin: lab.fin.clone(),
        steps,
        answers_file: answers_file.to_string(),
    }
}

/// This kdiag's path, when a shell would not find it as `kdiag` (a build
/// in target/release, or sudo's PATH without the user's folders).
fn kdiag_path() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    let on_path =
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d == dir));
    let standard = ["/usr/bin", "/usr/local/bin", "/bin"]
        .iter()
        .any(|d| dir == std::path::Path::new(d));
    (!(on_path && standard) && exe.file_name()? == "kdiag")
        .then(|| shell_word(&exe.display().to_string()))
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

fn submit(
    id: &str,
    out: Option<PathBuf>,
    folder: bool,
    learner: Option<String>,
    files: &Files,
) -> anyhow::Result<u8> {
    let source = files.source();
    let (lab, checks) = lab::load(&source, id)?;
    let dir = files.lab_dir(&lab.id)?;
    let answers = crate::grade::answers::Answers::load(&dir.answers())?;
    if answers.keys().is_empty() {
        return Err(error::usage(format!(
            "no answers yet in {}: run kdiag lab {} first",
            dir.answers().display(),
            lab.id
        )));
    }
    // On a course server: the account that invoked sudo, its course seed,
    // its own lab folder only, and a bundle signed with the journal.
    let server = policy::server()?;
    if let Some(server) = &server
        && let Some(l) = learner.as_ref().filter(|l| **l != server.learner)
    {
        return Err(error::usage(format!(
            "on this course server a submission is yours, learner {}: drop --learner {l}",
            server.learner
        )));
    }
    submission::own_folder(&dir)?;
    let seed = lab::seed::choose(None, Some(&dir))?;
    let learner = match &server {
        Some(server) => server.learner.clone(),
        None => learner.unwrap_or_else(lab::user_name),
    };
    let attempts = match &server {
        Some(server) => (server.attempts(&lab.id)?, lab::attempts::ATTESTED),
        None => (lab::attempts::local(&dir), lab::attempts::UNATTESTED),
    };
    let (seed_source, seed) = (seed.source, seed.token);
    let mut packed = submission::pack(
        &checks,
        &answers,
        &dir.path,
        &learner,
        seed.as_str(),
        seed_source,
        attempts,
    )?;
    if let Some(server) = &server {
        let signed = server.sign(&lab.id, &packed)?;
        packed.push((crate::course::attest::FILE.to_string(), signed));
    }
    let name = submission::default_name(&lab.id, &learner);
    let out = out.unwrap_or_else(|| PathBuf::from(if folder { name } else { name + ".tar" }));
    if folder {
        submission::write_folder(&out, &packed)?;
    } else {
        submission::write_archive(&out, &packed)?;
    }
    let names: Vec<&str> = packed.iter().map(|(n, _)| n.as_str()).collect();
    println!(
        "Wrote {} ({}) for learner {learner}, seed {seed}.\nCheck it as the grader will: kdiag check {} --submission {} --seed {seed}",
        out.display(),
        names.join(", "),
        lab.id,
        shell_word(&out.display().to_string()),
    );
    Ok(error::OK)
}

fn reference(
    id: &str,
    course: &std::path::Path,
    learner: &str,
    out: Option<PathBuf>,
    files: &Files,
) -> anyhow::Result<u8> {
    let source = files.source();
    let course = Course::load(course)?;
    let (lab, checks) = lab::load(&source, id)?;
    let seed = course.token(learner);
    match out {
        None => {
            let sol = solution::load(&source, &lab.id)?;
            let facts = lab::facts(&lab, &seed)?;
            print!("{}", solution::print(&sol, &lab, &facts, learner)?);
        }
        Some(dir) => {
            solution::make(&source, &lab, &checks, &seed, learner, &dir).with_context(|| {
                format!("cannot make the reference submission in {}", dir.display())
            })?;
            println!(
                "Wrote the reference submission of learner {learner} (seed {seed}) to {}",
                dir.display()
            );
        }
    }
    Ok(error::OK)
}
