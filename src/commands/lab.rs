//! `kdiag lab`: list the guided labs, run one, submit it, or (instructors)
//! print a learner's reference solution. Running is line-based, so it
//! works in any terminal and with piped input; the engine (lab/engine.rs)
//! does the work and this file only talks to the learner.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use anyhow::Context;

use crate::course::{Course, Token, token};
use crate::error;
use crate::grade::{Status, report};
use crate::lab::engine::{Engine, Resumed, shell_word};
use crate::lab::state::{self, LabDir, Progress};
use crate::lab::{self, Source, solution, submission};
use crate::sys::process::privilege;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Sub>,
    /// The lab to run (e.g. 0-demo); `kdiag lab list` lists them
    #[arg(required = true)]
    pub lab: Option<String>,
    /// Your seed token (from your course; default: the lab's last seed,
    /// else $KDIAG_SEED, else one derived from your user name)
    #[arg(long, value_name = "TOKEN")]
    pub seed: Option<String>,
    #[command(flatten)]
    pub files: Files,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// List the labs
    List {
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

/// Where a learner's lab files are, for lab, answer and check.
#[derive(Debug, Clone, clap::Args)]
pub struct Files {
    /// Folder for your labs' answers and progress (default:
    /// $XDG_STATE_HOME/kdiag/labs, i.e. ~/.local/state/kdiag/labs)
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Read labs and checks from this directory (labs/, checks/) instead of the built-in ones
    #[arg(long, value_name = "DIR")]
    pub labs: Option<PathBuf>,
}

impl Files {
    pub fn source(&self) -> Source {
        Source {
            dir: self.labs.clone(),
        }
    }

    /// The learner's folder for lab `id`.
    pub fn lab_dir(&self, id: &str) -> anyhow::Result<LabDir> {
        Ok(LabDir::new(&state::root(self.dir.as_deref())?, id))
    }
}

/// The seed when none is given: $KDIAG_SEED, else the self-study seed of
/// the user (the sudo invoker's name under sudo).
pub fn default_seed() -> anyhow::Result<Token> {
    if let Ok(v) = std::env::var("KDIAG_SEED") {
        return Token::parse(&v).map_err(|e| error::usage(format!("KDIAG_SEED: {e}")));
    }
    Ok(token::self_study_token(&user_name()))
}

/// The learner's user name (the sudo invoker's under sudo).
pub fn user_name() -> String {
    let uid = match privilege::invoker() {
        Some(who) => who.uid,
        // SAFETY: getuid cannot fail.
        None => unsafe { libc::getuid() },
    };
    privilege::user_name(uid).unwrap_or_else(|| format!("uid{uid}"))
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    match args.command {
        Some(Sub::List { files }) => list(&files.source()),
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
        None => {
            let lab = args.lab.expect("clap requires it");
            if lab == "list" {
                return list(&args.files.source());
            }
            run_lab(&lab, args.seed, &args.files)
        }
    }
}

fn list(source: &Source) -> anyhow::Result<u8> {
    for id in source.ids()? {
        let lab = source.lab(&id)?;
        println!("{:<10} {} (workload {})", lab.id, lab.title, lab.workload);
    }
    Ok(error::OK)
}

fn run_lab(id: &str, seed: Option<String>, files: &Files) -> anyhow::Result<u8> {
    let source = files.source();
    let root = state::root(files.dir.as_deref())?;
    let seed = match seed {
        Some(s) => Token::parse(&s).map_err(error::usage)?,
        None => {
            let before = Progress::load(&LabDir::new(&root, id).progress());
            match Token::parse(&before.seed) {
                Ok(t) => t,
                Err(_) => default_seed()?,
            }
        }
    };
    let (mut engine, resumed) = Engine::start(&source, id, seed, &root, files.dir.clone())?;
    let lab = engine.lab.clone();
    println!("== Lab {}: {} ==\n{}", lab.id, lab.title, lab.welcome.trim_end());
    println!(
        "\nkdiag started the workload (your variant: seed {}). Your answers go to\n{}\n\
         Record them with the commands each step shows (from any directory), or edit the file.",
        engine.seed,
        engine.dir.answers().display()
    );
    if let Some(r) = &resumed {
        print!("{}", resumed_text(r, &engine));
    }
    let result = guide(&mut engine, resumed.is_some());
    engine.stop();
    println!(
        "The workload has stopped. Your answers and progress stay in {}.",
        engine.dir.path.display()
    );
    result
}

fn resumed_text(r: &Resumed, engine: &Engine) -> String {
    let mut out = format!(
        "\nResuming: your answers are kept ({} graded checks pass already).\n",
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

/// Walk the steps from the first one whose checks do not pass.
fn guide(engine: &mut Engine, resumed: bool) -> anyhow::Result<u8> {
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let steps = engine.lab.steps.clone();
    for (n, step) in steps.iter().enumerate() {
        let header = format!("-- Step {}/{}: {} --", n + 1, steps.len(), step.title);
        if engine.step_passes(n) {
            if resumed {
                println!("\n{header}\nDone: your answers still pass.");
            }
            engine.mark_done(n)?;
            continue;
        }
        println!("\n{header}\n{}", step.text.trim_end());
        println!("\nRecord what you found:\n");
        for cmd in engine.record_commands(n) {
            println!("    {cmd}");
        }
        loop {
            print!("\n[c]heck  [h]int  [q]uit > ");
            std::io::stdout().flush()?;
            let Some(line) = lines.next().transpose()? else {
                println!();
                return Ok(error::FAILURE);
            };
            if let Some(why) = engine.workload_stopped() {
                anyhow::bail!("the workload stopped on its own ({why}); run the lab again");
            }
            match line.trim() {
                "c" | "check" => {
                    let checked = match engine.check(n) {
                        Ok(c) => c,
                        Err(e) => {
                            println!("{e:#}");
                            continue;
                        }
                    };
                    print!(
                        "{}",
                        report::render(report::Format::Text, &engine.lab.id, &checked.results)
                    );
                    if checked
                        .results
                        .iter()
                        .any(|r| !r.graded && r.status == Status::Passed)
                    {
                        println!("(checked against the running workload: your progress, not your grade)");
                    }
                    if checked.done {
                        println!("\nStep done.\n{}", step.explain.trim_end());
                        break;
                    }
                }
                "h" | "hint" => {
                    for (id, hint) in engine.hints(n) {
                        println!("{id}: {hint}");
                    }
                }
                "q" | "quit" => return Ok(error::FAILURE),
                "" => {}
                other => {
                    println!("{other:?}: type c to check your answers, h for a hint, q to quit")
                }
            }
        }
    }
    println!("\n== All steps done ==\n{}", engine.lab.fin.trim_end());
    println!(
        "\nCheck everything: {}\nSubmit:           kdiag lab submit {}{}",
        engine.check_command(),
        engine.lab.id,
        dir_flag(engine)
    );
    Ok(error::OK)
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
    let answers = crate::lab::answers::Answers::load(&dir.answers())?;
    if answers.keys().is_empty() {
        return Err(error::usage(format!(
            "no answers yet in {}: run kdiag lab {} first",
            dir.answers().display(),
            lab.id
        )));
    }
    let progress = Progress::load(&dir.progress());
    let seed = match Token::parse(&progress.seed) {
        Ok(t) => t,
        Err(_) => default_seed()?,
    };
    let learner = learner.unwrap_or_else(user_name);
    let packed = submission::pack(&checks, &answers, &dir.path, &learner, seed.as_str())?;
    let safe: String = learner
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect();
    let out = out.unwrap_or_else(|| {
        PathBuf::from(if folder {
            format!("kdiag-{}-{safe}", lab.id)
        } else {
            format!("kdiag-{}-{safe}.tar", lab.id)
        })
    });
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
            solution::make(&source, &lab, &checks, &seed, learner, &dir)
                .with_context(|| format!("cannot make the reference submission in {}", dir.display()))?;
            println!(
                "Wrote the reference submission of learner {learner} (seed {seed}) to {}",
                dir.display()
            );
        }
    }
    Ok(error::OK)
}
