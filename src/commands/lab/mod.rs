//! `kdiag lab`: list the guided labs, run one, reset one, submit it, or
//! (instructors) print a learner's reference solution. A lab runs as the
//! interactive app (tui::lab) on a terminal, or one command a line with
//! `--plain` or without a terminal; the engine (lab/engine.rs) does the
//! work, and session.rs hands it to the app as its `Driver`.

mod session;

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Context;

use super::args::Files;
use crate::course::Course;
use crate::error;
use crate::grade;
use crate::lab::engine::shell_word;
use crate::lab::medium::{Launch, Medium, line_for, runnable, text_for};
use crate::lab::state::{self, LabDir};
use crate::lab::{self, solution};
use crate::model::lab::{Input, Panel};
use crate::render::table::{Align, Table};
use crate::tui::lab::state::{LabView, Question, StepView};
use crate::user_files;

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
            session::run_lab(&lab, args.seed, args.plain, log.as_ref(), &args.files)
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
    let exe = kdiag_path();
    let start = Launch::here(exe.as_deref()).as_root();
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
        let (got, max, status) = lab::standing(&lab, &checks, &LabDir::new(&root, &lab.id))?;
        t.push(vec![
            lab.id.clone(),
            lab.title.clone(),
            lab.workload.clone(),
            status.into(),
            format!("{got}/{max}"),
            format!("{start} lab {}{dir}", lab.id),
        ]);
    }
    t.write(&mut std::io::stdout().lock())?;
    Ok(error::OK)
}

fn reset(id: &str, yes: bool, files: &Files) -> anyhow::Result<u8> {
    let (lab, _) = lab::load(&files.source(), id)?;
    let dir = files.lab_dir(&lab.id)?;
    let present = dir.resettable();
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
pub(super) fn kdiag_path() -> Option<String> {
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

fn submit(
    id: &str,
    out: Option<PathBuf>,
    folder: bool,
    learner: Option<String>,
    files: &Files,
) -> anyhow::Result<u8> {
    let (lab, checks) = lab::load(&files.source(), id)?;
    let s = lab::submit::submit(&checks, &files.lab_dir(&lab.id)?, out, folder, learner)?;
    println!(
        "Wrote {} ({}) for learner {}, seed {}.\nCheck it as the grader will: kdiag check {} --submission {} --seed {}",
        s.out.display(),
        s.files.join(", "),
        s.learner,
        s.seed,
        lab.id,
        shell_word(&s.out.display().to_string()),
        s.seed,
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
