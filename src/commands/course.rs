//! `kdiag course`: create a course (its secret) and hand out each learner's
//! seed token.

use std::path::PathBuf;

use crate::course::roster::{Roster, csv_field};
use crate::course::{Course, Token};
use crate::error;
use crate::lab::Source;

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
    },
    /// On a course server (as root): install the course so kdiag, run by
    /// learners through sudo, attests their work (the key stays root's)
    Install {
        /// The course file (kdiag course init)
        #[arg(long, value_name = "FILE")]
        course: PathBuf,
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
        Sub::Seeds { roster, course } => seeds(&roster, &course),
        Sub::Install { course } => {
            let to = crate::course::attest::install(&course)?;
            println!(
                "Installed {} as {} (root's, 0600). Learners running kdiag through sudo now \
                 check, answer and submit as their own account, journaled and signed; \
                 grade with: kdiag grade LAB DIR --course {}",
                course.display(),
                to.display(),
                course.display()
            );
            Ok(error::OK)
        }
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
    let source = Source::default();
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

fn seeds(roster: &std::path::Path, course: &std::path::Path) -> anyhow::Result<u8> {
    let course = Course::load(course)?;
    let roster = Roster::load(roster)?;
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
