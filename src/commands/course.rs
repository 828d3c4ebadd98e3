//! `kdiag course`: create a course (its secret), hand out each learner's
//! seed token, install it on a course server, and merge graded labs into
//! one gradebook.

use std::path::{Path, PathBuf};

use crate::course::roster::{Columns, Roster, csv_field};
use crate::course::{Course, Token};
use crate::error;
use crate::grade::gradebook::{self, GradedLab, Layout};
use crate::lab::LabSource;
use crate::user_files::{self, Limits};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Create a course file with a new random secret (mode 0600)
    Init {
        /// Where to write it; never overwritten
        #[arg(long, default_value = "course.toml")]
        out: PathBuf,
        /// The course's labs (default: every built-in lab)
        #[arg(long, value_delimiter = ',', value_name = "LAB,...")]
        labs: Vec<String>,
    },
    /// Print each learner's seed token (CSV: id,seed) from a roster
    Seeds {
        /// The class list: CSV with a header row and a learner id column
        /// (id, learner, student_id, sid, email, ...)
        roster: PathBuf,
        /// The course file (kdiag course init)
        #[arg(long, value_name = "FILE")]
        course: PathBuf,
        #[command(flatten)]
        columns: Columns,
    },
    /// On a course server (as root, or an administrator's sudo): install
    /// the course so kdiag, run by learners through sudo, attests their
    /// work (the key stays root's)
    Install {
        /// The course file (kdiag course init)
        #[arg(long, value_name = "FILE")]
        course: PathBuf,
        /// The class list, with each learner's login on this server (a
        /// login or username column, or --login-column): kdiag then knows
        /// each account as its roster id, for seeds and signatures
        #[arg(long, value_name = "CSV")]
        roster: Option<PathBuf>,
        #[command(flatten)]
        columns: Columns,
    },
    /// Merge graded labs into one gradebook: a row per learner, a column
    /// per lab (CSV, or Canvas's or Moodle's import layout)
    Gradebook {
        /// Each lab's grading, as `kdiag grade LAB DIR --course FILE
        /// --format json` wrote it; a folder stands for its *.json files
        #[arg(required = true, value_name = "GRADED")]
        graded: Vec<PathBuf>,
        /// The layout
        #[arg(long, value_enum, default_value = "csv")]
        format: Layout,
        /// The gradebook written before (any layout): list the scores
        /// that changed since (on standard error)
        #[arg(long, value_name = "CSV")]
        previous: Option<PathBuf>,
    },
    /// Say whether TOKEN is learner ID's seed
    Verify {
        /// The learner's id, as in the roster
        learner: String,
        /// The seed token they use
        token: String,
        /// The course file
        #[arg(long, value_name = "FILE")]
        course: PathBuf,
    },
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    match args.command {
        Sub::Init { out, labs } => init(out, labs),
        Sub::Seeds {
            roster,
            course,
            columns,
        } => seeds(&roster, &course, &columns),
        Sub::Install {
            course,
            roster,
            columns,
        } => {
            // Read first, as whoever runs kdiag (a sudo invoker reads as
            // themselves), so a bad file is refused for what it is.
            let loaded = Course::load(&course)?;
            let roster = roster.map(|r| Roster::load(&r, &columns)).transpose()?;
            crate::course::policy::require_admin("kdiag course install")?;
            let to = crate::course::attest::install(&loaded, roster.as_ref())?;
            let who = match &roster {
                Some(r) => format!(
                    "their roster id ({} learners, known by their login)",
                    r.learners.len()
                ),
                None => "their login (no --roster: seeds and grades key on logins)".into(),
            };
            println!(
                "Installed {} as {} (root's, 0600). Learners running kdiag through sudo now \
                 check, answer and submit as {who}, journaled and signed; grade with: kdiag \
                 grade LAB DIR --course {} --roster ROSTER.csv --require-attested",
                course.display(),
                to.display(),
                course.display()
            );
            Ok(error::OK)
        }
        Sub::Gradebook {
            graded,
            format,
            previous,
        } => merge_gradebook(&graded, format, previous.as_deref()),
        Sub::Verify {
            learner,
            token,
            course,
        } => {
            let course = Course::load(&course)?;
            let token = Token::parse(&token).map_err(error::usage)?;
            if course.verify(&learner, &token) {
                println!("{token} is the seed of learner {learner}");
                Ok(error::OK)
            } else {
                println!("{token} is not the seed of learner {learner}");
                Ok(error::FAILURE)
            }
        }
    }
}

fn init(out: PathBuf, labs: Vec<String>) -> anyhow::Result<u8> {
    let source = LabSource::default();
    let known = source.ids()?;
    let labs = if labs.is_empty() { known.clone() } else { labs };
    if let Some(bad) = labs.iter().find(|l| !known.contains(l)) {
        return Err(error::usage(format!(
            "no lab {bad:?}; the labs are: {}",
            known.join(", ")
        )));
    }
    let course = Course::generate(labs)?;
    course.create(&out)?;
    println!(
        "Created {} (labs: {}). Keep it private: its secret derives every learner's seed.\n\
         Next: kdiag course seeds ROSTER.csv --course {}",
        out.display(),
        course.labs.join(", "),
        out.display()
    );
    Ok(error::OK)
}

fn seeds(roster: &Path, course: &Path, columns: &Columns) -> anyhow::Result<u8> {
    let course = Course::load(course)?;
    let roster = Roster::load(roster, columns)?;
    let mut out = String::from("id,seed\n");
    for l in &roster.learners {
        out.push_str(&format!("{},{}\n", csv_field(&l.id), course.token(&l.id)));
    }
    print!("{out}");
    eprintln!(
        "{} learners. Each runs: kdiag lab LAB --seed THEIR_SEED",
        roster.learners.len()
    );
    Ok(error::OK)
}

/// A class's grading of every lab fits; a file far larger is not one.
const MAX_GRADED_BYTES: u64 = 256 << 20;

fn merge_gradebook(
    graded: &[PathBuf],
    layout: Layout,
    previous: Option<&Path>,
) -> anyhow::Result<u8> {
    let mut files = Vec::new();
    for p in graded {
        if p.is_dir() {
            let mut jsons: Vec<PathBuf> = user_files::read_dir(p)?
                .into_iter()
                .filter(|f| f.extension().is_some_and(|e| e == "json"))
                .collect();
            if jsons.is_empty() {
                return Err(error::usage(format!(
                    "{} holds no .json file: give the files kdiag grade ... --format json wrote",
                    p.display()
                )));
            }
            jsons.sort();
            files.extend(jsons);
        } else {
            files.push(p.clone());
        }
    }
    let read = |p: &Path| -> anyhow::Result<String> {
        Ok(user_files::read_to_string(
            p,
            &Limits::input().max(MAX_GRADED_BYTES),
        )?)
    };
    let mut labs: Vec<GradedLab> = Vec::new();
    for f in &files {
        let text = read(f)?;
        let lab: GradedLab = serde_json::from_str(&text).map_err(|e| {
            error::usage(format!(
                "{}: not a lab's grading ({e}): give what kdiag grade LAB DIR --course FILE \
                 --format json wrote",
                f.display()
            ))
        })?;
        labs.push(lab);
    }
    let book = gradebook::merge(&labs).map_err(error::usage)?;
    print!("{}", book.render(layout));
    let described: Vec<String> = book
        .labs
        .iter()
        .map(|(lab, max, version)| format!("{lab} (of {max} points, checks version {version})"))
        .collect();
    eprintln!(
        "Gradebook of {} learners: {}. An empty cell: nothing graded (see that lab's grading).",
        book.scores.len(),
        described.join(", ")
    );
    if let Some(prev) = previous {
        let name = prev.display().to_string();
        let changes = book.changes(&name, &read(prev)?).map_err(error::usage)?;
        eprintln!("Changed since {name}: {}", changes.len());
        for c in &changes {
            eprintln!("  {c}");
        }
    }
    Ok(error::OK)
}
