//! `kdiag lab`: list the guided labs, or run one: start its workload, show
//! one step at a time, check the learner's answers on request and move on
//! when a step's checks pass. Line-based, so it works in any terminal and
//! with piped input.

use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;

use crate::error;
use crate::grade::{self, CheckFile, Status, report};
use crate::lab::answers::Answers;
use crate::lab::session::Session;
use crate::lab::{self, Lab, Source};
use crate::sys::process::spawn::terminate;
use crate::sys::process::{privilege, user_files};
use crate::workloads;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The lab to run (e.g. 0-demo), or `list`
    pub lab: String,
    /// Seed for the workload's parameters (default: $KDIAG_SEED, else 0)
    #[arg(long)]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub files: Files,
}

/// Where a lab's files are, for lab, answer and check.
#[derive(Debug, clap::Args)]
pub struct Files {
    /// Directory for your answers, progress and the session (one folder per lab)
    #[arg(long, value_name = "DIR", default_value = "kdiag-labs")]
    pub dir: PathBuf,
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
    pub fn lab_dir(&self, id: &str) -> PathBuf {
        self.dir.join(id)
    }
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let source = args.files.source();
    if args.lab == "list" {
        for id in source.ids()? {
            let lab = source.lab(&id)?;
            println!("{:<10} {} (workload {})", lab.id, lab.title, lab.workload);
        }
        return Ok(error::OK);
    }
    let lab = source.lab(&args.lab)?;
    let checks = load_checks(&source, &lab.id)?;
    let seed = match args.seed {
        Some(s) => s,
        None => std::env::var("KDIAG_SEED")
            .ok()
            .map(|v| {
                v.parse()
                    .map_err(|_| error::usage(format!("KDIAG_SEED={v:?} is not a number")))
            })
            .transpose()?
            .unwrap_or(0),
    };
    let dir = args.files.lab_dir(&lab.id);
    user_files::create_dir_all(&dir)?;
    let dir = dir.canonicalize()?;

    let truth: serde_json::Value = serde_json::from_str(&workloads::ground_truth(
        &lab.workload,
        &seed.to_string(),
        &lab.workload_args,
    )?)
    .context("the workload's ground truth is not JSON")?;
    let mut workload = Workload::start(&lab, seed, &dir)?;
    let session = Session {
        lab: lab.id.clone(),
        seed,
        pid: workload.child.id(),
        dir: dir.clone(),
        truth,
    };
    let session_file = dir.join(Session::FILE);
    session.save(&session_file)?;

    let answers_file = dir.join("answers.toml");
    println!(
        "== Lab {}: {} ==\n{}",
        lab.id,
        lab.title,
        lab.welcome.trim_end()
    );
    println!(
        "\nkdiag started the workload (seed {seed}). Your answers go to {}\n\
         (record them with `kdiag answer {} KEY VALUE`, or edit the file).",
        answers_file.display(),
        lab.id
    );
    let result = guide(&lab, &checks, &session, &answers_file, &mut workload);
    workload.stop();
    println!(
        "The workload has stopped. Your answers and progress stay in {}.",
        dir.display()
    );
    result
}

/// Walk the steps from the first one not done yet.
fn guide(
    lab: &Lab,
    checks: &CheckFile,
    session: &Session,
    answers_file: &std::path::Path,
    workload: &mut Workload,
) -> anyhow::Result<u8> {
    let progress_file = session.dir.join("progress");
    let mut done: Vec<String> = std::fs::read_to_string(&progress_file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    let facts = session.facts();
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    for (n, step) in lab.steps.iter().enumerate() {
        if done.contains(&step.id) {
            continue;
        }
        println!(
            "\n-- Step {}/{}: {} --\n{}",
            n + 1,
            lab.steps.len(),
            step.title,
            step.text.trim_end()
        );
        loop {
            print!("\n[c]heck  [h]int  [q]uit > ");
            std::io::stdout().flush()?;
            let Some(line) = lines.next().transpose()? else {
                println!();
                return Ok(error::FAILURE);
            };
            if let Some(code) = workload.exited() {
                // Its own last words say why (e.g. its scratch directory is
                // in use by another run of it).
                let log =
                    std::fs::read_to_string(session.dir.join("workload.log")).unwrap_or_default();
                let why = log.lines().last().unwrap_or("no output");
                anyhow::bail!("the workload stopped on its own ({code}: {why}); run the lab again");
            }
            match line.trim() {
                "c" | "check" => {
                    let answers = match Answers::load(answers_file) {
                        Ok(a) => a,
                        Err(e) => {
                            println!("{e:#}");
                            continue;
                        }
                    };
                    let results = grade::evaluate(&checks.checks, &answers, &facts, Some(&step.id));
                    print!(
                        "{}",
                        report::render(report::Format::Text, &lab.id, &results)
                    );
                    if results.iter().all(|r| r.status == Status::Passed) {
                        println!("\nStep done.\n{}", step.explain.trim_end());
                        done.push(step.id.clone());
                        user_files::write(&progress_file, done.join("\n") + "\n")?;
                        break;
                    }
                }
                "h" | "hint" => {
                    let answers = Answers::load(answers_file).unwrap_or_default();
                    let results = grade::evaluate(&checks.checks, &answers, &facts, Some(&step.id));
                    for c in checks.checks.iter().filter(|c| c.step == step.id) {
                        if results
                            .iter()
                            .any(|r| r.id == c.id && r.status != Status::Passed)
                        {
                            println!("{}: {}", c.id, c.hint);
                        }
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
    println!("\n== All steps done ==\n{}", lab.fin.trim_end());
    Ok(error::OK)
}

pub fn load_checks(source: &Source, lab: &str) -> anyhow::Result<CheckFile> {
    let path = format!("checks/{lab}.toml");
    let checks: CheckFile = lab::parse_toml(&path, &source.read(&path)?)?;
    if checks.lab != lab {
        anyhow::bail!("{path} is for lab {:?}, not {lab:?}", checks.lab);
    }
    Ok(checks)
}

/// The lab's workload: run as the invoking user, and sent SIGTERM if kdiag
/// dies, so it never outlives the lab (it removes its scratch files itself).
struct Workload {
    child: Child,
}

impl Workload {
    fn start(lab: &Lab, seed: u64, dir: &std::path::Path) -> anyhow::Result<Workload> {
        let path = workloads::binary(&lab.workload)?;
        let log = dir.join("workload.log");
        let out = user_files::create(&log)?;
        let mut cmd = Command::new(&path);
        cmd.args(&lab.workload_args)
            .args(["--seed", &seed.to_string(), "--duration", "0"])
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        privilege::run_as_invoker(&mut cmd);
        // After the switch to the invoker: changing credentials clears the
        // parent-death signal.
        // SAFETY: prctl is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", path.display()))?;
        Ok(Workload { child })
    }

    /// Exit status, if the workload has ended.
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM, then SIGKILL after 5 s; reaped either way.
    fn stop(&mut self) {
        let child = &mut self.child;
        terminate(child.id(), Duration::from_secs(5), || {
            child.try_wait().ok().flatten().is_some()
        });
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop();
    }
}
