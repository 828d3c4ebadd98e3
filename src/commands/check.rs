//! `kdiag check LAB`: evaluate a lab's checks against an answers file and
//! the facts of the run, for the learner or an autograder.

use std::path::PathBuf;

use crate::error;
use crate::grade::{self, Status, report};
use crate::lab::answers::Answers;
use crate::lab::session::{Session, fill};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The lab (e.g. 0-demo)
    pub lab: String,
    /// Answers file (default: DIR/LAB/answers.toml)
    #[arg(long, value_name = "FILE")]
    pub answers: Option<PathBuf>,
    /// The lab session the answers are about (default: DIR/LAB/session.json)
    #[arg(long, value_name = "FILE")]
    pub session: Option<PathBuf>,
    /// Check the lab's reference answers (checks/solutions/LAB.toml) against the session instead
    #[arg(long, conflicts_with = "answers")]
    pub solution: bool,
    /// Only this check (e.g. who.pid)
    #[arg(long, value_name = "CHECK")]
    pub only: Option<String>,
    /// Output format
    #[arg(long, value_enum, default_value = "text")]
    pub format: report::Format,
    #[command(flatten)]
    pub files: super::lab::Files,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let source = args.files.source();
    let lab = source.lab(&args.lab)?;
    let mut checks = super::lab::load_checks(&source, &lab.id)?.checks;
    if let Some(only) = &args.only {
        checks.retain(|c| &c.id == only);
        if checks.is_empty() {
            return Err(error::usage(format!(
                "lab {} has no check {only:?}",
                lab.id
            )));
        }
    }
    let dir = args.files.lab_dir(&lab.id);
    let session = Session::load(
        &args
            .session
            .clone()
            .unwrap_or_else(|| dir.join(Session::FILE)),
    )?;
    let facts = session.facts();
    let answers = if args.solution {
        let path = format!("checks/solutions/{}.toml", lab.id);
        let filled = fill(&source.read(&path)?, &facts)
            .map_err(|f| anyhow::anyhow!("{path} names a fact the session lacks: {f}"))?;
        Answers::parse(&path, &filled)
    } else {
        Answers::load(
            &args
                .answers
                .clone()
                .unwrap_or_else(|| dir.join("answers.toml")),
        )
    };
    let answers = match answers {
        Ok(a) => a,
        Err(e) => {
            // Unreadable answers grade nothing: exit 2, with the format's way
            // of saying so (PrairieLearn: gradable false).
            print!(
                "{}",
                report::render_invalid(args.format, &lab.id, &format!("{e:#}"))
            );
            return Ok(error::USAGE);
        }
    };
    let results = grade::evaluate(&checks, &answers, &facts, None);
    print!("{}", report::render(args.format, &lab.id, &results));
    Ok(if results.iter().all(|r| r.status == Status::Passed) {
        error::OK
    } else {
        error::FAILURE
    })
}
